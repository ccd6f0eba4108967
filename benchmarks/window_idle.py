"""What an idle window processor costs, with a large open state.

A 1-hour tumbling `$group` over many keys keeps every partial open, so the operator's state
is large (about 11 MB for 200k keys). Each query starts as the service starts it
(`session.start_query`, 1 s trigger) and consumes the input; then the script watches
`--idle-s` seconds of idleness. An operator call in an idle micro-batch unpickles and
rewrites that whole state; until 8cf3588 every window pipeline paid it in every micro-batch
(1,504 ms per empty batch against 713 ms, +40.5 MB of checkpoint over 8 batches, measured
with this script then), and Spark ran an empty micro-batch on every trigger for every window
query. Three pipelines, same input, same process:

* `event time`: nothing closes windows on the wall clock: no micro-batch runs without input;
* `+ idleTimeout 1 h`: Spark's empty micro-batches run (the timeout needs them), the bucket
  sleeps until its next idle close, an hour away (`runtime.operator.state_timeout_ms`);
* `processingTime`: the same, until the first open window ends, an hour away.

Prints, per pipeline, the state size and, for the idle period: the micro-batches that ran,
operator calls in them, their median duration (`triggerExecution`) and how much the
checkpoint grew (state-store writes).

    python benchmarks/window_idle.py [--keys 200000] [--rows 400000] [--idle-s 10]
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
    """The compiled window stage over `window_throughput`'s typed documents (its
    `WindowPlan`: envelopes, and whether it runs when idle)."""
    from pipeline_stages import parse_stage
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._windowing.runtime.config import WindowSource

    ctx = CompileContext(spark=spark, processor_name="bench", problems=ProblemCollector())
    frame = wt.typed_frame(spark, directory)
    ctx.has_dlq = True
    ctx.window_source = WindowSource(partitions=1)  # type: ignore[attr-defined]
    stage = parse_stage(window_stage(options), path="/pipeline/1")
    plan = stage.entry.module.compile(stage.spec, frame, ctx, stage.path)
    ctx.problems.raise_if_any()
    return plan


def tree_bytes(directory: str) -> int:
    return sum(p.stat().st_size for p in Path(directory).rglob("*") if p.is_file())


def measure(compiled: Any, spark: Any, *, rows: int, idle_s: float) -> dict[str, Any]:
    """Start the query as the service does (`start_query`: micro-batches without input only
    when a window closes on the wall clock), consume the input, then watch `idle_s` seconds
    of idleness: micro-batches run, operator calls in them, their median duration, state
    size and how much the checkpoint grew."""
    from pipeline_stages._engine.session import start_query

    calls: dict[int, int] = {}
    state_size = [0]

    def sink(batch: Any, batch_id: int) -> None:
        stats = [r["doc"] for r in batch.filter(batch.kind == "stats").select("doc").collect()]
        calls[batch_id] = len(stats)
        for doc in stats:
            state_size[0] = int(json.loads(doc)["stateSize"])

    checkpoint = tempfile.mkdtemp(prefix="sluice-idle-")
    writer = compiled.envelopes.writeStream.foreachBatch(sink)
    writer = writer.option("checkpointLocation", checkpoint).trigger(processingTime="1 second")
    handle = start_query(
        writer,
        spark,
        idle_batches=compiled.runs_when_idle,
        state_partitions=compiled.state_partitions,
    )
    try:
        while sum(p["numInputRows"] for p in handle.recentProgress) < rows:
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
            time.sleep(0.2)
        consumed_by = max(p["batchId"] for p in handle.recentProgress)
        grown_from = tree_bytes(checkpoint)
        time.sleep(idle_s)  # a benchmark of idleness: it has to let the clock run
        progress = handle.recentProgress
    finally:
        handle.stop()
    ran = [p for p in progress if p["batchId"] > consumed_by and "addBatch" in p["durationMs"]]
    durations = [p["durationMs"]["triggerExecution"] for p in ran]
    return {
        "batches": len(ran),
        "calls": sum(calls.get(p["batchId"], 0) for p in ran),
        "median_ms": statistics.median(durations) if durations else 0.0,
        "state_bytes": state_size[0],
        "grown": tree_bytes(checkpoint) - grown_from,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--idle-s", type=float, default=10.0, help="seconds of idleness watched")
    args = parser.parse_args(argv)

    spark = wt.local_session("sluice-window-idle-bench")
    directory = Path(tempfile.mkdtemp(prefix="sluice-idle-input-"))
    wt.write_input(directory, rows=args.rows, files=args.files, keys=args.keys)
    print(f"{args.rows:,} rows, {args.keys:,} keys, one 1-hour window open, 1 s trigger")
    for name, options in PIPELINES.items():
        found = measure(query(spark, directory, options), spark, rows=args.rows, idle_s=args.idle_s)
        print(
            f"  {name:<18} state {found['state_bytes'] / 1e6:6.1f} MB   in {args.idle_s:g} s idle: "
            f"{found['batches']} micro-batches, {found['calls']} operator calls, "
            f"median {found['median_ms']:,.0f} ms each, checkpoint grew {found['grown'] / 1e6:,.1f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
