"""What one micro-batch costs: a `$tumblingWindow` `$group` count, one document per batch.

Sluice's compiled query (the conformance tests' scripted source and executor, which drive
micro-batches one at a time) against native Structured Streaming (`window()` count) on the
same source, in the same process and JVM. Each batch is timed from its input file to its
progress report; Spark's own `durationMs` breakdown is printed for both (medians from the 4th
batch on, so the first batches' start-up is left out):

    PYTHONPATH=$PWD python3 benchmarks/batch_overhead.py [--batches 30] [--conf KEY=VALUE ...]

`--conf` sets a Spark SQL setting for both queries (an A/B of a setting is two runs). After each
query, the last batch's planning is broken down: Spark's planning phases (analysis,
optimization, physical planning), the optimizer rules that took longest, and the size of the
physical plan, which is what every micro-batch re-plans.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql import functions as F  # noqa: E402

from pipeline_stages._connectors.sources import scripted  # noqa: E402
from service.runtime.process import source_position  # noqa: E402
from tests.conformance.spark_executor import SparkExecutor, spark_session, stop_active  # noqa: E402

PIPELINE = [
    {
        "$source": {
            "connectionName": "k",
            "topic": "e",
            "timeField": {"$dateFromString": {"dateString": "$ts"}},
        }
    },
    {
        "$tumblingWindow": {
            "interval": {"size": 1, "unit": "second"},
            "allowedLateness": {"size": 0, "unit": "second"},
            "pipeline": [{"$group": {"_id": None, "count": {"$sum": 1}}}],
        }
    },
    {"$emit": {"connectionName": "k", "topic": "r"}},
]
SKIP = 3


def document(i: int) -> dict[str, Any]:
    return {"id": i, "ts": f"2024-01-01T00:{i // 60:02d}:{i % 60:02d}.000Z"}


def report(name: str, walls: list[float], progress: list[Any]) -> None:
    print(f"{name}: a batch {1000 * statistics.median(walls[SKIP:]):.0f} ms (median)")
    for key in sorted({k for p in progress for k in p.durationMs}):
        values = [p.durationMs.get(key, 0) for p in progress[SKIP:]]
        print(f"  {key:18s} {statistics.median(values):6.0f} ms  (max {max(values):.0f})")


def planning(name: str, query: Any) -> None:
    """The last batch's planning phases and slowest rules (Spark's `QueryPlanningTracker`)."""
    execution = query._jsq.streamingQuery().lastExecution()
    tracker = execution.tracker()
    phases = tracker.phases()
    for phase in ("analysis", "optimization", "planning"):
        summary = phases.get(phase)
        took = f"{summary.get().durationMs():6d} ms" if summary.isDefined() else "  (not run)"
        print(f"  {name} {phase:12s} {took}")
    rules = tracker.topRulesByTime(8)
    for i in range(rules.size()):
        rule = rules.apply(i)
        short = rule._1().rsplit(".", 1)[-1]
        summary = rule._2()
        ms = summary.totalTimeNs() / 1e6
        print(f"    {short:40s} {ms:6.1f} ms over {summary.numInvocations()} runs")
    plan = execution.executedPlan().toString()
    print(f"  {name} physical plan: {plan.count(chr(10)) + 1} operators, {len(plan)} characters")


def timed(batches: int, run_one: Callable[[int], None]) -> list[float]:
    walls = []
    for i in range(batches):
        began = time.monotonic()
        run_one(i)
        walls.append(time.monotonic() - began)
    return walls


def sluice(batches: int) -> None:
    executor = SparkExecutor()
    executor.start(PIPELINE)

    def run_one(i: int) -> None:
        executor.feed([document(i)])
        executor.drain()

    walls = timed(batches, run_one)
    report("Sluice", walls, executor.query.recentProgress)
    planning("Sluice", executor.query)
    stop_active()


def native(batches: int) -> None:
    spark = spark_session()
    directory = tempfile.mkdtemp(prefix="sluice-native-")
    raw = spark.readStream.format(scripted.FORMAT).option("dir", directory).load()
    times = (
        raw.where(F.col("raw").isNotNull())
        .select(F.from_json("raw", "id long, ts string").alias("d"))
        .select(F.to_timestamp("d.ts").alias("t"))
    )
    counts = times.withWatermark("t", "0 seconds").groupBy(F.window("t", "1 second")).count()
    results: list[Any] = []
    query = (
        counts.writeStream.outputMode("append")
        .foreachBatch(lambda frame, _batch: results.extend(frame.collect()))
        .option("checkpointLocation", f"{directory}/checkpoint")
        .trigger(processingTime="0 seconds")
        .start()
    )

    def run_one(i: int) -> None:
        scripted.write_batch(directory, i, [[0, i + 1, json.dumps(document(i)), 0, "{}"]])
        while source_position(query.lastProgress) != i + 1:
            time.sleep(0.02)

    walls = timed(batches, run_one)
    report("native", walls, query.recentProgress)
    planning("native", query)
    query.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    for setting in args.conf:
        key, _, value = setting.partition("=")
        spark_session().conf.set(key, value)
        print(f"{key} = {value}")
    sluice(args.batches)
    native(args.batches)


if __name__ == "__main__":
    main()
