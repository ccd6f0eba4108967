"""Windows: Atlas window semantics, the runtime that hosts them, and their Spark compile.

* `geometry`: fixed-window geometry (tumbling/hopping), closing, lateness (§4.1, §4.3, §4.4);
* `watermark`: per-partition watermarks and the idle-timeout rule (§4.2, §4.5, §4.6);
* `sessions`: `$sessionWindow` merge and close rules (§3.6);
* `sliding`: KIP-450 sliding windows for Sluice's `$slidingWindow` extension;
* `accumulators/`: every `$group` accumulator as a mergeable, JSON-serialisable partial state;
* `stage_fields`: the fields and rules the window stages' specs share;
* `runtime/`: the cores the window operator runs (plain Python and pandas);
* `batch/`: the batch engine, the same cores run per micro-batch in the driver;
* `spark/`: compiling a window stage into the stateful operator.

The rule modules import no Spark: the Spark operator and the pure-Python reference executor of
the conformance suite both build on them, which is what makes their results comparable.
"""
