"""Which micro-batches call the window operator in production (processing-time timeouts).

Every call of a bucket unpickles and rewrites its whole state, so a bucket is only called in
micro-batches without its input when something closes windows on the wall clock, and then
sleeps until that is due: the next idle close, the end of a processing-time window
(`runtime.operator.state_timeout_ms`; the exact wake-ups, and partition idleness, are tested
in `tests/unit/windowing/test_idle_wake.py`). The operator emits one stats row per call,
which is how these tests see the calls. Micro-batches run on a short trigger; the tests wait
on batch ids and results, never on time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._engine.session import start_query
from pipeline_stages._stream.context import CompileContext
from pipeline_stages._stream.frame import KIND_OUTPUT, KIND_STATS
from tests.streaming import wait_until

pytestmark = pytest.mark.spark

#: Per micro-batch id: (operator calls, window results).
Batches = dict[int, tuple[int, int]]
#: The query's progress events, oldest first.
Progress = list[dict[str, Any]]

DOCS = [{"k": "a", "t": {"$date": f"2024-01-01T00:00:{s}Z"}} for s in ("01", "02", "12", "19.5")]
GROUP = [{"$group": {"_id": "$k", "n": {"$count": {}}}}]
IDLE_PROGRESS_EVERY = "spark.sql.streaming.noDataProgressEventInterval"


def window(extra: dict[str, Any], kind: str = "tumbling") -> dict[str, Any]:
    if kind == "session":  # sessions [01, 02], [12] and [19.5] with a 2 s gap
        gap = {"size": 2, "unit": "second"}
        return {"$sessionWindow": {"gap": gap, "partitionBy": "$k", "pipeline": GROUP, **extra}}
    return {
        "$tumblingWindow": {"interval": {"size": 10, "unit": "second"}, "pipeline": GROUP, **extra}
    }


def run(
    spark: Any,
    tmp_path: Path,
    extra: dict[str, Any],
    done: Callable[[Batches, Progress], bool],
    kind: str = "tumbling",
) -> tuple[Batches, Progress]:
    """Per micro-batch id: (operator calls = stats rows, window results), until `done`, and
    the progress events. The query starts as the service starts it (`start_query`); Spark
    reports a trigger that ran no micro-batch every 100 ms."""
    register_all(spark)
    source = {"$source": {"documents": DOCS, "timeField": "$t"}}
    parsed = parse_pipeline([source, window(extra, kind)])
    ctx = CompileContext(spark=spark, processor_name="idle-calls", problems=ProblemCollector())
    ctx.batch_size = len(DOCS)  # all input in the first micro-batch
    compiled = compile_pipeline(parsed, ctx)
    batches: Batches = {}

    def collect(batch: Any, batch_id: int) -> None:
        kinds = [row.kind for row in batch.select("kind").collect()]
        batches[batch_id] = (kinds.count(KIND_STATS), kinds.count(KIND_OUTPUT))

    writer = (
        compiled.envelopes.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
    )
    previous = spark.conf.get(IDLE_PROGRESS_EVERY)
    spark.conf.set(IDLE_PROGRESS_EVERY, "100ms")  # the query copies it when it starts
    try:
        query = start_query(
            writer,
            spark,
            idle_batches=compiled.runs_when_idle,
            state_partitions=compiled.state_partitions,
        )
    finally:
        spark.conf.set(IDLE_PROGRESS_EVERY, previous)

    def progress() -> Progress:
        return [json.loads(p.json) if hasattr(p, "json") else p for p in query.recentProgress]

    try:
        wait_until(query, lambda: done(batches, progress()), "the batches the test needs", 180)
    finally:
        query.stop()
    return batches, progress()


def five_batches(batches: Batches, _progress: Progress) -> bool:
    return len(batches) >= 5


def test_a_window_without_a_clock_rule_runs_no_micro_batch_without_input(
    spark: Any, tmp_path: Path
) -> None:
    def idle_triggers_after_input(batches: Batches, progress: Progress) -> bool:
        """Spark reported three triggers that ran no micro-batch (no `addBatch` time) since
        the input's micro-batch."""
        ran = [n for n, p in enumerate(progress) if "addBatch" in p.get("durationMs", {})]
        return 0 in batches and bool(ran) and len(progress) - ran[-1] - 1 >= 3

    batches, progress = run(spark, tmp_path, {"allowedLateness": 0}, idle_triggers_after_input)
    assert batches == {0: (1, 1)}  # the input: [00:00, 00:10) closes on 00:12
    assert [p["batchId"] for p in progress if "addBatch" in p["durationMs"]] == [0]


def test_input_less_batches_do_not_call_a_sleeping_operator(spark: Any, tmp_path: Path) -> None:
    extra = {"allowedLateness": 0, "idleTimeout": {"size": 1, "unit": "hour"}}
    batches, _ = run(spark, tmp_path, extra, five_batches)
    first, *later = sorted(batches)
    assert batches[first] == (1, 1)  # the input: [00:00, 00:10) closes on 00:12
    assert [batches[b][0] for b in later] == [0] * len(later)


def test_processing_time_windows_sleep_until_their_window_ends(spark: Any, tmp_path: Path) -> None:
    extra = {"boundary": "processingTime", "interval": {"size": 2, "unit": "second"}}

    def closed_and_then_some(batches: Batches, _progress: Progress) -> bool:
        closed = [b for b, (_, results) in batches.items() if results]
        return bool(closed) and max(batches) >= closed[0] + 3

    batches, _ = run(spark, tmp_path, extra, closed_and_then_some)
    first, *later = sorted(batches)
    assert batches[first] == (1, 0)  # the documents open the window holding their arrival
    (closed,) = [b for b in later if batches[b][1]]
    assert batches[closed] == (1, 1)  # woken by its timeout once the window ended
    assert [batches[b][0] for b in later if b != closed] == [0] * (len(later) - 1)


@pytest.mark.parametrize(("kind", "on_input"), [("tumbling", 1), ("session", 2)])
def test_the_idle_timeout_still_closes_the_last_window_on_the_clock(
    spark: Any, tmp_path: Path, kind: str, on_input: int
) -> None:
    extra = {"allowedLateness": 0, "idleTimeout": {"size": 1, "unit": "second"}}
    total = on_input + 1
    batches, _ = run(
        spark, tmp_path, extra, lambda b, _: sum(r for _, r in b.values()) >= total, kind
    )
    first, *later = sorted(batches)
    closed_idle = [b for b in later if batches[b][1]]
    # Tumbling: [00:10, 00:20) closes without input; sessions: the one at 00:19.5.
    assert batches[first][1] == on_input and len(closed_idle) == 1
    assert batches[closed_idle[0]][0] == 1  # woken by its timeout
