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

`--ab KEY=VALUE` (repeatable: one variant with all of them) compares within one process
instead: Sluice as configured, Sluice with the settings set around its query's start (a query
copies the session's SQL conf when it starts) and native run at the same time, fed one batch
each in turn, and the median of the paired differences is printed too. With
`--ab-session-partitions` the variant's query runs its window operator on the session's
shuffle partitions, as queries did before `CompiledPipeline.state_partitions`; with
`--ab-bare-start` it starts without any of Sluice's start settings (`session.stream_settings`:
the state partitions and the optimizer rules left out), as queries did before both:

    PYTHONPATH=$PWD python3 benchmarks/batch_overhead.py --batches 30 --ab-bare-start

With `--sequential` the three run alone instead, one after the other, `--rounds` times (the
two Sluice queries swap places every round). Every query alone also reports the CPU time of
the whole process tree (driver, JVM, Python workers) per batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
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
from pipeline_stages._engine.session import query_settings  # noqa: E402
from service.runtime.process import source_position  # noqa: E402
from tests.conformance import spark_executor  # noqa: E402
from tests.conformance.spark_executor import SparkExecutor, spark_session, stop_active  # noqa: E402

PIPELINE: list[dict[str, Any]] = [
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
    operators = progress[-1].stateOperators if progress else []
    partitions = ", ".join(str(o.numStateStoreInstances) for o in operators)
    print(
        f"{name}: a batch {1000 * statistics.median(walls[SKIP:]):.0f} ms (median), "
        f"state partitions: {partitions or '-'}"
    )
    for key in sorted({k for p in progress for k in p.durationMs}):
        values = [p.durationMs.get(key, 0) for p in progress[SKIP:]]
        print(f"  {key:18s} {statistics.median(values):6.0f} ms  (max {max(values):.0f})")


PHASES = ("analysis", "optimization", "planning")


def phases(query: Any) -> dict[str, int]:
    """The last batch's planning phases in ms (Spark's `QueryPlanningTracker`)."""
    tracker = query._jsq.streamingQuery().lastExecution().tracker().phases()
    durations = {}
    for phase in PHASES:
        summary = tracker.get(phase)
        if summary.isDefined():
            durations[phase] = int(summary.get().durationMs())
    return durations


def report_phases(name: str, batches: list[dict[str, int]]) -> None:
    """Medians of every batch's planning phases (from batch SKIP + 1 on)."""
    medians = [
        f"{phase} {statistics.median(b.get(phase, 0) for b in batches[SKIP:]):.0f}"
        for phase in PHASES
    ]
    print(f"  {name} planning phases, medians of every batch (ms): {', '.join(medians)}")


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


def tree_cpu_seconds() -> float:
    """CPU time of this process and all its descendants (the JVM, Python workers), from
    /proc: what a batch costs the machine, where the wall time hides work done in parallel."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        # utime, stime, cutime, cstime (fields 14-17 of stat; 2 fields precede here)
        ticks[int(entry.name)] = sum(int(v) for v in fields[11:15])
    root = os.getpid()
    total = 0
    for pid, tick in ticks.items():
        ancestor = pid
        while ancestor not in (root, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == root:
            total += tick
    return total / os.sysconf("SC_CLK_TCK")


def timed(batches: int, run_one: Callable[[int], None]) -> tuple[list[float], float]:
    """Each batch's wall time, and the CPU seconds per batch from batch SKIP + 1 on."""
    walls = []
    cpu = 0.0
    for i in range(batches):
        if i == SKIP:
            cpu = tree_cpu_seconds()
        began = time.monotonic()
        run_one(i)
        walls.append(time.monotonic() - began)
    return walls, (tree_cpu_seconds() - cpu) / max(1, batches - SKIP)


def no_settings(spark: Any, state_partitions: int | None) -> dict[str, str]:
    """`session.stream_settings` as it was before there were any."""
    del spark, state_partitions
    return {}


class SluiceRun:
    """Sluice's compiled query on the scripted source (the conformance executor, which starts
    it as the service does); `settings` are set on the session around its start, and
    `session_partitions` starts it on the session's shuffle partitions instead of the
    operator's (`CompiledPipeline.state_partitions`: how queries started before that), and
    `bare` without any of `session.stream_settings` (how they started before both)."""

    def __init__(
        self,
        settings: dict[str, str] | None = None,
        *,
        session_partitions: bool = False,
        bare: bool = False,
    ) -> None:
        self.name = "Sluice" + "".join(f" {k}={v}" for k, v in (settings or {}).items())
        if session_partitions:
            self.name += " on the session's partitions"
        if bare:
            self.name += " without the start settings"
        self.executor = SparkExecutor()
        started_with = spark_executor.stream_settings
        if bare:
            spark_executor.stream_settings = no_settings
        try:
            with query_settings(spark_session(), settings or {}):
                # Not `start`, which stops every other executor's query (interleaved runs).
                self.executor._start(spark_session(), PIPELINE, 1)
                if session_partitions:
                    compiled = self.executor.compiled
                    self.executor.compiled = dataclasses.replace(compiled, state_partitions=None)
                    self.executor.restart()  # no batch ran yet: a new checkpoint
        finally:
            spark_executor.stream_settings = started_with
        self.query = self.executor.query
        self.phases: list[dict[str, int]] = []

    def step(self, i: int) -> None:
        self.executor.feed([document(i)])
        self.executor.drain()
        self.phases.append(phases(self.query))

    def stop(self) -> None:
        self.query.stop()
        self.executor.sink.close()


class NativeRun:
    """Native `window()` count on the same source."""

    name = "native"

    def __init__(self) -> None:
        spark = spark_session()
        self.directory = tempfile.mkdtemp(prefix="sluice-native-")
        raw = spark.readStream.format(scripted.FORMAT).option("dir", self.directory).load()
        times = (
            raw.where(F.col("raw").isNotNull())
            .select(F.from_json("raw", "id long, ts string").alias("d"))
            .select(F.to_timestamp("d.ts").alias("t"))
        )
        counts = times.withWatermark("t", "0 seconds").groupBy(F.window("t", "1 second")).count()
        self.results: list[Any] = []
        self.query = (
            counts.writeStream.outputMode("append")
            .foreachBatch(lambda frame, _batch: self.results.extend(frame.collect()))
            .option("checkpointLocation", f"{self.directory}/checkpoint")
            .trigger(processingTime="0 seconds")
            .start()
        )
        self.phases: list[dict[str, int]] = []

    def step(self, i: int) -> None:
        scripted.write_batch(self.directory, i, [[0, i + 1, json.dumps(document(i)), 0, "{}"]])
        while source_position(self.query.lastProgress) != i + 1:
            time.sleep(0.02)
        self.phases.append(phases(self.query))

    def stop(self) -> None:
        self.query.stop()


def alone(run: SluiceRun | NativeRun, batches: int) -> tuple[list[float], float]:
    """`batches` micro-batches of `run` with no other query running; its report. Returns
    the walls from batch SKIP + 1 on and the CPU seconds per batch."""
    walls, cpu = timed(batches, run.step)
    report(run.name, walls, run.query.recentProgress)
    print(f"  CPU (process tree)  {1000 * cpu:6.0f} ms a batch")
    report_phases(run.name, run.phases)
    planning(run.name, run.query)
    run.stop()
    stop_active()
    return walls[SKIP:], cpu


def sequential(batches: int, rounds: int, variant: Callable[[], SluiceRun]) -> None:
    """Sluice, its variant and native alone, `rounds` times; the two Sluice queries swap
    places every round (the JVM warms up as it goes)."""
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    for number in range(rounds):
        print(f"--- round {number + 1} of {rounds} ({os.getloadavg()[0]:.1f} load)")
        makers: list[Callable[[], SluiceRun | NativeRun]] = [SluiceRun, variant]
        for make in [*(makers if number % 2 == 0 else makers[::-1]), NativeRun]:
            run = make()
            wall, cpu = alone(run, batches)
            walls.setdefault(run.name, []).extend(wall)
            cpus.setdefault(run.name, []).append(cpu)
    print(f"=== medians over {rounds} rounds")
    for name, values in walls.items():
        cpu = 1000 * statistics.median(cpus[name])
        print(f"  {name:40s} {1000 * statistics.median(values):5.0f} ms, CPU {cpu:5.0f} ms a batch")


def settings_of(pairs: list[str]) -> dict[str, str]:
    """`KEY=VALUE` arguments as a dict."""
    return dict(pair.partition("=")[::2] for pair in pairs)


def interleaved(batches: int, runs: list[SluiceRun | NativeRun]) -> None:
    """The queries of `runs`, all started, fed one batch each in turn (who goes first rotates
    every batch), so a change in the machine's load reaches all of them alike. A query
    waiting for its turn polls its source (Spark's polling delay), for all of them alike."""
    walls: dict[str, list[float]] = {run.name: [] for run in runs}
    began_cpu = 0.0
    for i in range(batches):
        if i == SKIP:
            began_cpu = tree_cpu_seconds()
        turn = i % len(runs)
        for run in runs[turn:] + runs[:turn]:
            began = time.monotonic()
            run.step(i)
            walls[run.name].append(time.monotonic() - began)
    cpu = (tree_cpu_seconds() - began_cpu) / (batches - SKIP)
    print(f"=== {batches} batches each, interleaved (medians from batch {SKIP + 1} on)")
    print(f"  CPU (process tree, all queries) {1000 * cpu:.0f} ms a round of batches")
    first = runs[0].name
    for run in runs:
        report(run.name, walls[run.name], run.query.recentProgress)
        if run.name != first:
            differences = [b - a for a, b in zip(walls[first], walls[run.name], strict=True)]
            median = 1000 * statistics.median(differences[SKIP:])
            print(f"  paired difference to {first}: {median:+.0f} ms (median)")
    for run in runs:
        report_phases(run.name, run.phases)
    for run in runs:
        planning(run.name, run.query)
        run.stop()
    stop_active()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--ab", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--ab-session-partitions", action="store_true")
    parser.add_argument("--ab-bare-start", action="store_true")
    parser.add_argument("--sequential", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    for key, value in settings_of(args.conf).items():
        spark_session().conf.set(key, value)
        print(f"{key} = {value}")
    if args.ab or args.ab_session_partitions or args.ab_bare_start:

        def variant() -> SluiceRun:
            return SluiceRun(
                settings_of(args.ab),
                session_partitions=args.ab_session_partitions,
                bare=args.ab_bare_start,
            )

        if args.sequential:
            sequential(args.batches, args.rounds, variant)
        else:
            interleaved(args.batches, [SluiceRun(), variant(), NativeRun()])
        return
    alone(SluiceRun(), args.batches)
    alone(NativeRun(), args.batches)


if __name__ == "__main__":
    main()
