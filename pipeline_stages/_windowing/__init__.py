"""Atlas window semantics in pure Python: the arithmetic every window executor shares.

* `assign`: fixed-window geometry (tumbling/hopping), closing, lateness (§4.1, §4.3, §4.4);
* `watermark`: per-partition watermarks and the idle-timeout rule (§4.2, §4.5, §4.6);
* `sessions`: `$sessionWindow` merge and close rules (§3.6);
* `sliding`: KIP-450 sliding windows for Sluice's `$slidingWindow` extension;
* `accumulators` (+ `acc_collect`, `acc_numeric`, `acc_ordered`): every `$group` accumulator
  as a mergeable, JSON-serialisable partial state.

No Spark here: the Spark window operator (applyInPandasWithState) and the pure-Python
reference executor of the conformance suite both build on these modules, which is what makes
their results comparable.
"""
