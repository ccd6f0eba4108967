"""Sources read in parallel, in Spark: a File or HTTP-ingest micro-batch is read by several
tasks, a replayed batch reads the same records with the same `seq`, and a large Kafka backlog
is cut over several tasks keeping each record's `part` and the offset order within a task;
a source followed by a one-bucket window reads in one task.

Stateless queries are driven with `processAllAvailable` (no window timeouts in these plans);
which task read a row is `spark_partition_id()`, taken in the batch itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources import files, http_ingest, kafka
from pipeline_stages._connectors.sources.http_ingest import encode_record
from pipeline_stages._connectors.sources.raw_source import read_tasks, task_slots
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._connectors.sources.spool import Spool
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from tests.integration.kafka_runs import drop_last_commit

pytestmark = pytest.mark.spark

Batches = dict[int, list[tuple[Any, ...]]]


def run(spark: Any, stream: Any, checkpoint: Path) -> Batches:
    """Every micro-batch's rows `(task, part, seq, raw, meta, error)`, by batch id."""
    from pyspark.sql import functions as F

    seen: Batches = {}

    def collect(df: Any, batch_id: int) -> None:
        rows = df.select(
            F.spark_partition_id().alias("task"), "part", "seq", "raw", "meta", "error"
        ).collect()
        seen[batch_id] = [tuple(r) for r in rows]

    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return seen


def tasks_of(rows: list[tuple[Any, ...]]) -> set[int]:
    return {row[0] for row in rows}


def without_task(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(row[1:] for row in rows)


def replayed(spark: Any, build: Callable[[], Any], checkpoint: Path) -> tuple[Batches, Batches]:
    """The batches of a first run, and of a second run after its last commit was lost."""
    first = run(spark, build(), checkpoint)
    drop_last_commit(checkpoint)
    return first, run(spark, build(), checkpoint)


def test_a_file_batch_is_read_by_several_tasks_and_replays_the_same(
    spark: Any, tmp_path: Path
) -> None:
    register_all(spark)
    directory = tmp_path / "in"
    directory.mkdir()
    lines = [json.dumps({"n": n, "v": n / 2}) for n in range(900)]
    lines[10] = ""  # blank: skipped, keeps its number
    lines[11] = '{"d": {"$date": "garbage"}}'  # poison: flagged for the DLQ
    (directory / "a.jsonl").write_text("\n".join(lines[:500]) + "\n", encoding="utf-8")
    (directory / "b.jsonl").write_text("\n".join(lines[500:]) + "\n", encoding="utf-8")
    (directory / "c.jsonl").write_text("", encoding="utf-8")  # b's lines are all complete

    def build() -> Any:
        return (
            spark.readStream.format(files.FORMAT)
            .option("directory", str(directory))
            .option("maxRecordsPerBatch", "600")
            .option("parallelism", "3")
            .option("minRowsPerTask", "100")
            .load()
        )

    first, second = replayed(spark, build, tmp_path / "cp")
    assert sorted(first) == [0, 1]
    assert [len(tasks_of(first[b])) for b in (0, 1)] == [3, 3]
    rows = [row for b in (0, 1) for row in first[b]]
    assert sorted(row[2] for row in rows) == [n + 1 for n in range(900) if n != 10]
    by_seq = {row[2]: row for row in rows}
    assert json.loads(by_seq[1][3]) == {"n": 0, "v": 0.0}
    assert by_seq[2][3] == '{"n": 1, "v": 0.5e0}'
    assert json.loads(by_seq[600][4]) == {"type": "file", "path": "b.jsonl", "line": 100}
    assert by_seq[12][5] is not None and "invalid Extended JSON" in by_seq[12][5]
    # The lost batch runs again from the checkpoint's offsets: the same records and seq.
    assert sorted(second) == [1]
    assert without_task(second[1]) == without_task(first[1])


def test_an_http_ingest_backlog_is_read_by_several_tasks_and_replays_the_same(
    spark: Any, tmp_path: Path
) -> None:
    register_all(spark)
    spool = Spool(tmp_path / "data", segment_bytes=8_000)
    for first in range(0, 900, 100):
        records = [json.dumps({"i": i, "v": i / 4}).encode() for i in range(first, first + 100)]
        spool.append("in1", [encode_record(raw, 1_000 + first) for raw in records])

    def build() -> Any:
        return (
            spark.readStream.format(http_ingest.FORMAT)
            .option("dataDir", str(tmp_path / "data"))
            .option("connection", "in1")
            .option("startSeq", "0")
            .option("maxRecordsPerBatch", "500")
            .option("parallelism", "4")
            .option("minRowsPerTask", "100")
            .load()
        )

    first, second = replayed(spark, build, tmp_path / "cp")
    assert [len(tasks_of(first[b])) for b in sorted(first)] == [4, 4]
    rows = sorted(row for b in first for row in first[b])
    assert [row[2] for row in sorted(rows, key=lambda r: r[2])] == list(range(1, 901))
    by_seq = {row[2]: row for row in rows}
    assert by_seq[2][3] == '{"i": 1, "v": 0.25e0}'
    assert json.loads(by_seq[2][4]) == {"type": "httpIngest", "connectionName": "in1", "seq": 2}
    assert sorted(second) == [1]
    assert without_task(second[1]) == without_task(first[1])


@pytest.mark.kafka
def test_a_large_kafka_backlog_is_cut_over_tasks_keeping_part_and_order(
    spark: Any, kafka_broker: Any, tmp_path: Path
) -> None:
    register_all(spark)
    topic = kafka_broker.create_topic(2)
    kafka_broker.produce(topic, [json.dumps({"p": 0, "i": i}) for i in range(3_000)], partition=0)
    kafka_broker.produce(topic, [json.dumps({"p": 1, "i": i}) for i in range(20)], partition=1)
    stream = (
        spark.readStream.format(kafka.FORMAT)
        .option("clientConfigSecret", json.dumps({"bootstrap.servers": kafka_broker.bootstrap}))
        .option("topics", json.dumps([topic]))
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "10000")
        .option("minPartitions", "4")
        .option("minRowsPerTask", "500")
        .load()
    )
    (rows,) = run(spark, stream, tmp_path / "cp").values()
    big = [row for row in rows if row[1] == 0]
    assert len(tasks_of(big)) > 1  # partition 0's backlog was read by several tasks
    assert {row[1] for row in rows} == {0, 1}
    for part, count in ((0, 3_000), (1, 20)):
        mine = [row for row in rows if row[1] == part]
        assert sorted(row[2] for row in mine) == list(range(count))  # every offset once
        assert all(json.loads(row[3]) == {"p": part, "i": row[2]} for row in mine)
        assert all(json.loads(row[4])["partition"] == part for row in mine)
    for task in tasks_of(rows):  # each task reads its range in offset order
        offsets = [row[2] for row in rows if row[0] == task]
        assert offsets == sorted(offsets)


TUMBLING = {
    "$tumblingWindow": {
        "interval": {"size": 1, "unit": "second"},
        "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
    }
}
SESSION = {
    "$sessionWindow": {
        "partitionBy": "$k",
        "gap": {"size": 1, "unit": "second"},
        "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
    }
}


@pytest.mark.parametrize(
    ("stages", "engine", "buckets", "one_task"),
    [
        ([TUMBLING], None, None, True),
        ([{"$match": {"k": 1}}, SESSION], None, None, True),
        ([{"$match": {"k": 1}}], None, None, False),
        ([TUMBLING], None, 2, False),
        ([TUMBLING], "batch", None, False),
    ],
    ids=["tumbling", "session", "stateless", "two-buckets", "batch-engine"],
)
def test_a_source_reads_each_batch_in_one_task_when_a_one_task_window_follows(
    spark: Any,
    tmp_path: Path,
    stages: list[Any],
    engine: str | None,
    buckets: int | None,
    one_task: bool,
) -> None:
    """A one-bucket window coalesces its input to one task, so the source's reader is told
    to cut nothing; anything else keeps the session's task slots (2 in the test session)."""
    register_all(spark)
    (tmp_path / "files" / "in").mkdir(parents=True)
    ctx = CompileContext(
        spark=spark,
        processor_name="p",
        problems=ProblemCollector(),
        connections={
            "files": ConnectionInfo("files", "File", {"directory": str(tmp_path / "files")})
        },
        window_engine=engine,
        window_buckets=buckets,
    )
    pipeline = [{"$source": {"connectionName": "files", "path": "in"}}, *stages]
    compile_pipeline(parse_pipeline(pipeline), ctx)
    assert task_slots(spark) == 2
    assert read_tasks(ctx) == (1 if one_task else 2)
