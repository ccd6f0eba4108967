"""The settings a window query starts with (`session.stream_settings`). State partitions: a
new checkpoint of a one-bucket window gets one (`CompiledPipeline.state_partitions`), since
Spark calls the operator's Python function once per partition and micro-batch, empty ones
included, and its rows then reach the operator without a shuffle; one split over P buckets
gets the fewest over which the buckets land apart (`spark.state_partitions`); a checkpoint
made with another count keeps it. Optimizer rules: `NO_OP_RULES` do not run in the query's
micro-batches.

The test session has 2 shuffle partitions. Each query runs through the conformance executor,
which starts queries as the service does (`session.stream_settings`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pyspark.sql import functions as F

from pipeline_stages._engine.session import (
    EXCLUDED_RULES,
    NO_OP_RULES,
    SHUFFLE_PARTITIONS,
    STATE_STORE_PARTITIONS,
    stream_settings,
)
from pipeline_stages._windowing.spark.state_partitions import (
    partition_of,
    spark_hash_int,
    spread_partitions,
)
from tests.conformance.spark_executor import SparkExecutor, SparkParallelExecutor, stop_active

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PIPELINE = [
    {
        "$source": {
            "connectionName": "k",
            "topic": "e",
            "timeField": {"$dateFromString": {"dateString": "$t"}},
        }
    },
    {
        "$tumblingWindow": {
            "interval": {"size": 1, "unit": "second"},
            "allowedLateness": 0,
            "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
        }
    },
]


def state_partitions(executor: SparkExecutor) -> tuple[int, int]:
    """The operator's (shuffle partitions, state store instances) in the last micro-batch."""
    operator = executor.query.lastProgress["stateOperators"][0]
    return operator["numShufflePartitions"], operator["numStateStoreInstances"]


def conf_seen(executor: SparkExecutor) -> dict[str, Any]:
    """What set the partitions, for a failure's message: the last batch's session and the
    shared session's settings."""
    keys = [SHUFFLE_PARTITIONS, STATE_STORE_PARTITIONS]
    seen: dict[str, Any] = {"checkpoint": executor.directory}
    try:
        batch = executor.query._jsq.streamingQuery().lastExecution().sparkSession().conf()
        seen["batch"] = {k: batch.get(k, "unset") for k in keys}
        shared = executor.compiled.envelopes.sparkSession.conf
        seen["shared"] = {k: shared.get(k, None) for k in keys}
    except Exception as error:  # noqa: BLE001 - a diagnostic must not hide the failure
        seen["error"] = repr(error)
    return seen


def shuffled(executor: SparkExecutor) -> bool:
    """Whether the last micro-batch shuffled rows to the window operator (an exchange on the
    bucket column in its physical plan)."""
    plan = executor.query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    return "Exchange hashpartitioning(__w_bucket" in plan


def run(executor: SparkExecutor, times: list[int]) -> list[dict[str, Any]]:
    """One micro-batch per document (event times in ms from 2024-01-01, group key "a");
    the results."""
    out: list[dict[str, Any]] = []
    for t in times:
        executor.feed([{"t": f"2024-01-01T00:00:{t // 1000:02d}.{t % 1000:03d}Z", "k": "a"}])
        out += executor.drain()[0]
    return out


def counts(results: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(r["_id"], r["n"]) for r in results]


def rules_run(executor: SparkExecutor) -> set[str]:
    """The names of the optimizer rules the last micro-batch ran."""
    rules = executor.query._jsq.streamingQuery().lastExecution().tracker().rules()
    names = set()
    entries = rules.iterator()
    while entries.hasNext():
        names.add(entries.next()._1())
    return names


def test_the_settings_keep_the_sessions_excluded_rules(spark: Any) -> None:
    mine = "org.apache.spark.sql.catalyst.optimizer.ConstantFolding"
    before = spark.conf.get(EXCLUDED_RULES, None)
    spark.conf.set(EXCLUDED_RULES, mine)
    try:
        settings = stream_settings(spark, None)
    finally:
        if before is None:
            spark.conf.unset(EXCLUDED_RULES)
        else:
            spark.conf.set(EXCLUDED_RULES, before)
    assert settings == {
        EXCLUDED_RULES: ",".join([mine, *NO_OP_RULES]),
        STATE_STORE_PARTITIONS: spark.conf.get(SHUFFLE_PARTITIONS),
    }
    one = stream_settings(spark, 1)
    assert one[SHUFFLE_PARTITIONS] == one[STATE_STORE_PARTITIONS] == "1"


def test_state_partitions_left_on_the_session_do_not_leak_into_a_new_query(spark: Any) -> None:
    """Spark 4 takes a new checkpoint's state partitions from its internal setting when the
    session holds one (a full test run's session did: 2, from an earlier query)."""
    before = spark.conf.get(STATE_STORE_PARTITIONS, None)
    spark.conf.set(STATE_STORE_PARTITIONS, "2")
    executor = SparkExecutor()
    try:
        executor.start(PIPELINE)
        run(executor, [0, 500])
        assert state_partitions(executor) == (1, 1), conf_seen(executor)
    finally:
        stop_active()
        if before is None:
            spark.conf.unset(STATE_STORE_PARTITIONS)
        else:
            spark.conf.set(STATE_STORE_PARTITIONS, before)


def test_a_new_one_bucket_window_runs_its_state_in_one_partition() -> None:
    executor = SparkExecutor()
    executor.start(PIPELINE)
    try:
        assert executor.compiled.state_partitions == 1
        results = run(executor, [0, 500, 1500, 2500])
        assert state_partitions(executor) == (1, 1), conf_seen(executor)
        assert counts(results) == [("a", 2), ("a", 1)]
        # One partition satisfies the operator: no shuffle, one stage (`compile._operator`).
        assert not shuffled(executor)
        ran = rules_run(executor)
        assert "org.apache.spark.sql.catalyst.optimizer.ConstantFolding" in ran
        assert not ran & set(NO_OP_RULES)
    finally:
        stop_active()


def test_an_existing_checkpoint_keeps_its_state_partitions_across_a_restart() -> None:
    executor = SparkExecutor()
    executor.start(PIPELINE)
    try:
        compiled = executor.compiled
        # A checkpoint started before one-bucket windows got one partition: the session's 2.
        executor.compiled = dataclasses.replace(compiled, state_partitions=None)
        executor.restart()  # the first query saw no batch: this one starts the checkpoint
        before = run(executor, [0, 400])
        assert state_partitions(executor) == (2, 2)
        executor.compiled = compiled
        executor.restart()
        after = run(executor, [800, 1500, 2500])
        # Spark restores the offset log's partition count; the window spans the restart.
        assert state_partitions(executor) == (2, 2)
        assert shuffled(executor)  # into the checkpoint's two state partitions
        assert counts(before + after) == [("a", 3), ("a", 1)]
    finally:
        stop_active()


def test_a_window_split_over_two_buckets_gets_partitions_that_keep_them_apart() -> None:
    """Spark hashes bucket ids 0 and 1 to one partition of 2: the two buckets would run one
    after the other in one task. A new checkpoint gets 3 partitions, where they land apart."""
    executor = SparkParallelExecutor()
    executor.start(PIPELINE)
    try:
        assert executor.compiled.state_partitions == 3
        results = run(executor, [0, 500, 1500])
        assert state_partitions(executor) == (3, 3), conf_seen(executor)
        assert shuffled(executor)
        assert counts(results) == [("a", 2)]
    finally:
        stop_active()


def test_the_bucket_partitions_are_sparks_own(spark: Any) -> None:
    """`spark_hash_int` is Spark's `hash()` of an INT, and `spread_partitions` keeps bucket ids
    apart under Spark's own hash partitioning (`repartition` by the column, as the stateful
    operator's shuffle does)."""
    ids = [-(2**31), -7, -1, 0, 1, 2, 3, 41, 1000, 2**31 - 1]
    frame = spark.createDataFrame([(i,) for i in ids], "b int")
    hashed = [row[0] for row in frame.select(F.hash("b")).collect()]
    assert hashed == [spark_hash_int(i) for i in ids]
    for buckets in range(2, 9):
        partitions = spread_partitions(buckets)
        assert partitions is not None and partitions >= buckets
        frame = spark.createDataFrame([(b,) for b in range(buckets)], "b int")
        placed = frame.repartition(partitions, "b").select("b", F.spark_partition_id()).collect()
        assert sorted(p for _, p in placed) == sorted(
            {partition_of(b, partitions) for b in range(buckets)}
        )
        assert len({p for _, p in placed}) == buckets
