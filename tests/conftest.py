"""Shared fixtures: one SparkSession for the whole test run (cold start is 15-40 s here)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.kafka_broker import kafka_broker  # noqa: F401 - the session's Kafka broker fixture

# C1-only JIT halves JVM start-up; good for tests, not for throughput (spark-spike.md §1).
os.environ.setdefault("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1")


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """The run's single local SparkSession (local[2], UI off, 2 shuffle partitions)."""
    from pipeline_stages._engine.session import build_session

    session = build_session(
        master="local[2]",
        app_name="sluice-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    yield session
    # Stop queries a failed test may have left running before the context goes away, or they
    # log "Cannot call methods on a stopped SparkContext" at exit.
    for query in session.streams.active:
        query.stop()
    session.stop()
