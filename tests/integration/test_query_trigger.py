"""How the service triggers a query (`session.start_query` with an interval): a query that
runs no micro-batch without input runs its micro-batches back to back while input waits, and
polls for new input every interval only when there is none.

The interval here is ten minutes: a fixed processing-time trigger would start the second of
three waiting micro-batches ten minutes after the first, so the test would time out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._engine.session import POLLING_DELAY, start_query
from pipeline_stages._stream.context import CompileContext
from pipeline_stages._stream.frame import KIND_OUTPUT
from tests.streaming import wait_until

pytestmark = pytest.mark.spark

TEN_MINUTES_MS = 600_000


def test_waiting_input_runs_back_to_back_whatever_the_interval(spark: Any, tmp_path: Path) -> None:
    register_all(spark)
    docs = [{"i": i} for i in range(6)]
    parsed = parse_pipeline([{"$source": {"documents": docs}}, {"$match": {"i": {"$gte": 0}}}])
    ctx = CompileContext(spark=spark, processor_name="trigger", problems=ProblemCollector())
    ctx.batch_size = 2  # three micro-batches of input
    compiled = compile_pipeline(parsed, ctx)
    assert not compiled.runs_when_idle
    outputs: dict[int, int] = {}

    def collect(batch: Any, batch_id: int) -> None:
        outputs[batch_id] = sum(row.kind == KIND_OUTPUT for row in batch.select("kind").collect())

    writer = compiled.envelopes.writeStream.foreachBatch(collect).option(
        "checkpointLocation", str(tmp_path / "checkpoint")
    )
    polling_before = spark.conf.get(POLLING_DELAY)
    query = start_query(writer, spark, idle_batches=False, interval_ms=TEN_MINUTES_MS)
    try:
        wait_until(query, lambda: sum(outputs.values()) == len(docs), "three micro-batches", 300)
    finally:
        query.stop()
    assert sorted(outputs) == [0, 1, 2]
    assert all(count == 2 for count in outputs.values())
    # The polling delay was the query's own: the session's setting is as it was.
    assert spark.conf.get(POLLING_DELAY) == polling_before
