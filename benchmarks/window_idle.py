"""What an idle window processor costs per empty micro-batch, with a large open state.

A 1-hour tumbling `$group` over many keys keeps every partial open, so the operator's state
is large (about 11 MB for 200k keys). Once the input is consumed, the query keeps running on a
1 s trigger with processing-time timeouts, as the service runs it. An operator call in an
empty batch unpickles and rewrites that whole state; until 8cf3588 every window pipeline paid
it in every batch, and until this script's processingTime line read 0 calls, processing-time
windows did (1,504 ms per empty batch against 713 ms, +40.5 MB of checkpoint over 8 batches,
measured with this script at 8cf3588). Three pipelines, same input, same process:

* `event time`: nothing closes windows on the wall clock, so the operator is not called in
  micro-batches without input (`OperatorSpec.runs_when_idle`); an empty batch is Spark's own
  bookkeeping;
* `+ idleTimeout 1 h`: the bucket sleeps until its next idle close, an hour away
  (`window_operator.state_timeout_ms`);
* `processingTime`: windows close on the clock; the bucket sleeps until the first open window
  ends, an hour away.

Prints, per pipeline, the state size, operator calls during the idle batches, the median
duration of an empty micro-batch (`triggerExecution`, Spark's own no-data batch once the
operator is not called) and how much the checkpoint grew while idle (state-store writes).

    python benchmarks/window_idle.py [--keys 200000] [--rows 400000] [--idle-batches 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import window_throughput as wt  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

HOUR_MS = 3_600_000


PIPELINES: dict[str, dict[str, Any]] = {
    "event time": {"allowedLateness": {"size": wt.LATENESS_MS, "unit": "ms"}},
    "+ idleTimeout 1 h": {
        "allowedLateness": {"size": wt.LATENESS_MS, "unit": "ms"},
        "idleTimeout": {"size": 1, "unit": "hour"},
    },
    "processingTime": {"boundary": "processingTime"},
}


def window_stage(options: dict[str, Any]) -> dict[str, Any]:
    group = {"_id": "$key", "sum": {"$sum": "$v"}, "n": {"$count": {}}}
    return {
        "$tumblingWindow": {
            "interval": {"size": HOUR_MS, "unit": "ms"},
            "pipeline": [{"$group": group}],
            **options,
        }
    }


def query(spark: SparkSession, directory: Path, options: dict[str, Any]) -> Any:
    """The compiled window stage over `window_throughput`'s typed documents."""
    from pipeline_stages import parse_stage
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._engine.context import CompileContext
    from pipeline_stages._engine.window_config import WindowSource

    ctx = CompileContext(spark=spark, processor_name="bench", problems=ProblemCollector())
    frame = wt.typed_frame(spark, directory)
    ctx.has_dlq = True
    ctx.window_source = WindowSource(partitions=1)  # type: ignore[attr-defined]
    stage = parse_stage(window_stage(options), path="/pipeline/1")
    plan = stage.entry.module.compile(stage.spec, frame, ctx, stage.path)
    ctx.problems.raise_if_any()
    return plan.envelopes


def tree_bytes(directory: str) -> int:
    return sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file())


def measure(df: Any, *, rows: int, idle_batches: int) -> tuple[float, int, int, int]:
    """(median empty-batch ms, operator calls in empty batches, state bytes, bytes the
    checkpoint grew by during the empty batches)."""
    calls: dict[int, int] = {}
    state_size = [0]

    def sink(batch: Any, batch_id: int) -> None:
        stats = [r["doc"] for r in batch.filter(batch.kind == "stats").select("doc").collect()]
        calls[batch_id] = len(stats)
        for doc in stats:
            state_size[0] = int(json.loads(doc)["stateSize"])

    checkpoint = tempfile.mkdtemp(prefix="sluice-idle-")
    handle = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    handle = handle.trigger(processingTime="1 second").start()
    grown_from: int | None = None
    try:
        while True:
            progress = handle.recentProgress
            consumed = sum(p["numInputRows"] for p in progress)
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
            empty = [p for p in progress if p["numInputRows"] == 0 and consumed >= rows]
            if empty and grown_from is None:
                grown_from = tree_bytes(checkpoint)
            if len(empty) >= idle_batches:
                break
            time.sleep(0.2)
    finally:
        handle.stop()
    grown = tree_bytes(checkpoint) - (grown_from or 0)
    empty_ids = [p["batchId"] for p in empty]
    durations = [p["durationMs"]["triggerExecution"] for p in empty]
    calls_when_empty = sum(calls.get(b, 0) for b in empty_ids)
    return statistics.median(durations), calls_when_empty, state_size[0], grown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--idle-batches", type=int, default=8)
    args = parser.parse_args(argv)

    spark = wt.local_session("sluice-window-idle-bench")
    directory = Path(tempfile.mkdtemp(prefix="sluice-idle-input-"))
    wt.write_input(directory, rows=args.rows, files=args.files, keys=args.keys)
    print(f"{args.rows:,} rows, {args.keys:,} keys, one 1-hour window open, 1 s trigger")
    for name, options in PIPELINES.items():
        median_ms, calls, size, grown = measure(
            query(spark, directory, options), rows=args.rows, idle_batches=args.idle_batches
        )
        print(
            f"  {name:<18} state {size / 1e6:6.1f} MB   operator calls in "
            f"{args.idle_batches} empty batches: {calls}   empty batch median {median_ms:,.0f} ms"
            f"   checkpoint grew {grown / 1e6:,.1f} MB while idle"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
