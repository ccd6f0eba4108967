"""Shared fixtures: one SparkSession for the whole test run (cold start is 15-40 s here)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kafka_broker import kafka_broker  # noqa: F401 - the session's Kafka broker fixture

#: Files run longest-first: xdist hands out whole files (`--dist loadfile`) in collection order
#: (`--no-loadscope-reorder`; its default order, most tests first, left the two-test crash
#: file, ten minutes on its own, for last while the other worker sat idle).
_FILE_RANK = (("slow", 0), ("spark", 1), ("kafka", 1))
_LAST_RANK = 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order whole files: those with `slow` tests first, then Spark and Kafka files, then the rest."""
    rank_of_file: dict[str, int] = {}
    for item in items:
        marks = {mark.name for mark in item.iter_markers()}
        item_rank = min((rank for name, rank in _FILE_RANK if name in marks), default=_LAST_RANK)
        path = str(item.path)
        rank_of_file[path] = min(rank_of_file.get(path, _LAST_RANK), item_rank)
    # A stable sort on the file's rank keeps each file's tests together and in their order.
    items.sort(key=lambda item: rank_of_file[str(item.path)])


# The test run's own JVM keeps the full JIT: it runs for the whole suite, and 26 Spark
# transcripts took 177-196 s with it vs 213-217 s C1-only (RESULTS.md, sixth session). The
# short-lived JVMs of CLI and service tests stay C1-only, which starts faster (each sets it).


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
