"""Which micro-batches call the window operator in production (processing-time timeouts).

Every call of a bucket unpickles and rewrites its whole state, so a bucket is only called in
micro-batches without its input when something closes windows on the wall clock
(`OperatorSpec.runs_when_idle`). The operator emits one stats row per call, which is how these
tests see the calls. Micro-batches run on a short trigger; the tests wait on batch ids, never on
time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._engine.context import CompileContext
from pipeline_stages._engine.frame import KIND_STATS
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._engine.sources import register_all
from tests.streaming import wait_until

pytestmark = pytest.mark.spark

DOCS = [{"k": "a", "t": {"$date": f"2024-01-01T00:00:{s:02d}Z"}} for s in (1, 2, 12)]


def window(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "$tumblingWindow": {
            "interval": {"size": 10, "unit": "second"},
            "allowedLateness": 0,
            "pipeline": [{"$group": {"_id": "$k", "n": {"$count": {}}}}],
            **extra,
        }
    }


def stats_per_batch(spark: Any, tmp_path: Path, extra: dict[str, Any]) -> dict[int, int]:
    """Stats rows (= operator calls) per micro-batch id, over 4 batches after the input."""
    register_all(spark)
    source = {"$source": {"documents": DOCS, "timeField": "$t"}}
    parsed = parse_pipeline([source, window(extra)])
    ctx = CompileContext(spark=spark, processor_name="idle-calls", problems=ProblemCollector())
    ctx.batch_size = len(DOCS)  # all input in the first micro-batch
    compiled = compile_pipeline(parsed, ctx)
    calls: dict[int, int] = {}

    def collect(batch: Any, batch_id: int) -> None:
        calls[batch_id] = batch.filter(batch.kind == KIND_STATS).count()

    query = (
        compiled.envelopes.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until(query, lambda: len(calls) >= 5, "5 micro-batches", 180)
    finally:
        query.stop()
    return calls


def test_without_a_wall_clock_rule_input_less_batches_do_not_call_the_operator(
    spark: Any, tmp_path: Path
) -> None:
    calls = stats_per_batch(spark, tmp_path, {})
    first, *later = sorted(calls)
    assert calls[first] == 1  # the batch with the input
    assert [calls[b] for b in later] == [0] * len(later)


def test_an_idle_timeout_calls_the_operator_in_every_batch(spark: Any, tmp_path: Path) -> None:
    calls = stats_per_batch(spark, tmp_path, {"idleTimeout": {"size": 1, "unit": "hour"}})
    assert set(calls.values()) == {1}
