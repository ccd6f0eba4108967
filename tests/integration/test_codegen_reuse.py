"""A running query's generated code is compiled once, not in every micro-batch.

Structured Streaming plans every micro-batch again and gives each random seed a new value
each time; a seed in the plan is a literal in the generated Java code, so a plan holding
`rand(seed)` made Spark compile that code again (Janino) in every batch. Sluice's filters used
such a barrier (`_stream.frame.filter_rows`). This test reads Spark's own count of code
compilations (`CodegenMetrics`) over the later micro-batches of a query that filters before
and inside a window.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conformance.spark_executor import SparkExecutor, spark_session, stop_active

pytestmark = pytest.mark.spark

PIPELINE: list[dict[str, Any]] = [
    {"$source": {"connectionName": "k", "topic": "e", "timeField": {"$dateFromString": {"dateString": "$ts"}}}},  # fmt: skip
    {"$match": {"v": {"$gte": 0}}},
    {
        "$tumblingWindow": {
            "interval": {"size": 1, "unit": "second"},
            "allowedLateness": {"size": 0, "unit": "second"},
            "pipeline": [{"$match": {"v": {"$lt": 100}}}, {"$group": {"_id": "$k", "n": {"$sum": 1}}}],
        }
    },
    {"$emit": {"connectionName": "k", "topic": "r"}},
]  # fmt: skip


def document(i: int) -> dict[str, Any]:
    return {"k": i % 2, "v": i, "ts": f"2024-01-01T00:00:{i:02d}.000Z"}


def compilations() -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    metrics = spark_session()._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def test_later_micro_batches_compile_no_code() -> None:
    executor = SparkExecutor()
    executor.start(PIPELINE)
    try:
        emitted: list[dict[str, Any]] = []
        for i in range(3):  # the first batches compile the query's code
            executor.feed([document(i)])
            emitted += executor.drain()[0]
        before = compilations()
        for i in range(3, 8):
            executor.feed([document(i)])
            emitted += executor.drain()[0]
        assert compilations() == before
        # The batches ran: the windows of seconds 0 to 5 closed (the watermark, 7 s - 1 ms, has
        # not reached the end of second 6's window).
        assert len(emitted) == 6
    finally:
        stop_active()
