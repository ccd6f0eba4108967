"""Sinks writing on the executors (`_engine.partitions`), on the shared SparkSession.

The service's writer stack (`ProcessorWriter`: sink, DLQ, sample buffer, stats) runs behind
`ForeachBatchSink`; batches are either a streaming query's (driven by its progress, never
slept on) or static DataFrames handed to the sink with a chosen batch id and partitioning,
which is how Spark replays a batch after a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId

from pipeline_stages import parse_pipeline
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine import partitions
from pipeline_stages._engine import sink as engine_sink
from pipeline_stages._engine.sink import ForeachBatchSink
from pipeline_stages._stream.batch import object_id
from pipeline_stages._stream.context import ConnectionInfo
from pipeline_stages._stream.envelope import ENVELOPE_SCHEMA
from service.manager.stats import LiveStats
from service.manager.writers import DlqWriter, ProcessorWriter, SampleBuffer
from service.runtime.assemble import compile_context, compile_run
from service.runtime.sink_resources import (
    ClusterClients,
    StoreSinkResources,
    build_run_partition_sink,
)
from service.stores.base import DlqQuery
from service.stores.sqlite import SqliteStores
from tests.streaming import wait_until

pytestmark = pytest.mark.spark

SAMPLE = 50


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[SqliteStores]:
    opened = SqliteStores(tmp_path / "sluice.db")
    yield opened
    opened.close()


def processor_writer(
    stores: SqliteStores, pipeline: list[Any], files: ConnectionInfo, *, on_this_host: bool = True
) -> Any:
    resources = StoreSinkResources(
        local=stores.documents, connections={"files": files}, clients=ClusterClients()
    )
    sink = build_run_partition_sink(
        parse_pipeline(pipeline),
        resources,
        processor="p",
        run_tag="r",
        executors_on_this_host=on_this_host,
    )
    return ProcessorWriter(
        generation=1,
        stats=LiveStats(),
        sample=SampleBuffer(stores.documents, "p", capacity=SAMPLE),
        dlq=DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="i"),
        sink=sink,
    )


def file_lines(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(directory.iterdir())
        if path.is_file() and not path.name.startswith(".")
        for line in path.read_text().splitlines()
    ]


def test_a_120k_row_batch_never_reaches_the_driver(
    spark: Any, stores: SqliteStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = 120_000
    (tmp_path / "files" / "in").mkdir(parents=True)
    with (tmp_path / "files" / "in" / "000.jsonl").open("w") as handle:
        for n in range(rows):
            handle.write(json.dumps({"n": n, "ok": n % 4 != 0}) + "\n")
    files = ConnectionInfo("files", "File", {"directory": str(tmp_path / "files")})
    pipeline = [
        {
            "$source": {
                "connectionName": "files",
                "path": "in",
                "streamMetaFieldName": "",
                "config": {"maxOffsetsPerTrigger": rows},
            }
        },
        {"$match": {"ok": True}},
        {"$addFields": {"twice": {"$multiply": ["$n", 2]}}},
        {"$project": {"_ts": 0}},
        {"$emit": {"connectionName": "files", "path": "out"}},
    ]
    writer = processor_writer(stores, pipeline, files)
    # Every row the driver receives from Spark, by action.
    received: list[tuple[str, int]] = []
    dataframe = type(spark.range(1))
    collect = dataframe.collect

    def counted_collect(self: Any) -> Any:
        found = collect(self)
        received.append(("collect", len(found)))
        return found

    def refused(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a batch was pulled into the driver")

    monkeypatch.setattr(dataframe, "collect", counted_collect)
    monkeypatch.setattr(dataframe, "toArrow", refused)
    monkeypatch.setattr(dataframe, "toPandas", refused)
    summaries: list[tuple[int, int]] = []
    kinds: list[str] = []
    summarize = engine_sink.Summarizer.__call__

    def spied(self: Any, df: Any, batch_id: int) -> Any:
        found = summarize(self, df, batch_id)
        summaries.append((len(found), df.rdd.getNumPartitions()))
        kinds.extend(row["kind"] for row in found)
        return found

    monkeypatch.setattr(engine_sink.Summarizer, "__call__", spied)
    register_all(spark)
    ctx = compile_context(
        spark, processor="p", connections={"files": files}, has_dlq=True, batch_size=rows
    )
    compiled = compile_run(parse_pipeline(pipeline), ctx)
    foreach = compiled.foreach_batch(writer, processor="p", state_dir=None)
    query = (
        compiled.envelopes.writeStream.foreachBatch(foreach)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        wait_until(
            query,
            lambda: writer.stats.totals["outputMessageCount"] > 0,
            "the batch to be written",
            600,
        )
    finally:
        query.stop()
    expected = [n for n in range(rows) if n % 4 != 0]
    lines = file_lines(tmp_path / "files" / "out")
    assert [line["n"] for line in lines] == expected
    assert all(line["twice"] == 2 * line["n"] for line in lines)
    # One summary per batch, and nothing bigger crossed into the driver.
    # Per partition: its last outputs (for the sample), its count and the file it staged.
    assert summaries and all(size <= parts * (SAMPLE + 2) for size, parts in summaries), kinds
    assert sorted(set(kinds)) == ["count", "out", "staged"]
    most = max(parts * (SAMPLE + 2) for _, parts in summaries)
    assert most < 1000
    assert received and max(size for _, size in received) <= most
    totals = writer.stats.totals
    assert totals["outputMessageCount"] == len(expected)
    raw = [
        line
        for path in (tmp_path / "files" / "out").iterdir()
        for line in path.read_bytes().splitlines()
    ]
    assert totals["outputMessageSize"] == sum(len(line) for line in raw)
    messages, _ = writer.sample.recent(SAMPLE)
    assert [m["n"] for m in messages] == expected[-SAMPLE:]


def envelopes(spark: Any, docs: list[dict[str, Any]], partitions: int) -> Any:
    rows = [
        ("out", 0, seq, 0, None, json.dumps(doc), None, None, None, None, None, None)
        for seq, doc in enumerate(docs)
    ]
    return spark.createDataFrame(rows, ENVELOPE_SCHEMA).repartition(partitions)


def test_a_replay_partitioned_differently_writes_files_and_counts_once(
    spark: Any, stores: SqliteStores, tmp_path: Path
) -> None:
    files = ConnectionInfo("files", "File", {"directory": str(tmp_path / "files")})
    pipeline = [
        {"$source": {"connectionName": "files", "path": "in"}},
        {"$emit": {"connectionName": "files", "path": "out"}},
    ]
    writer = processor_writer(stores, pipeline, files)
    sink = ForeachBatchSink(writer, processor="p")
    docs = [{"n": n} for n in range(500)]
    sink(envelopes(spark, docs, 3), 7)
    first = sorted(p.name for p in (tmp_path / "files" / "out").iterdir())
    sink(envelopes(spark, docs, 2), 7)  # Spark replays batch 7 after a crash
    out = tmp_path / "files" / "out"
    assert sorted(line["n"] for line in file_lines(out)) == list(range(500))
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    assert len(first) == 3 and all(name.startswith("p-r-000000000007-") for name in first)
    totals = writer.stats.totals
    assert totals["outputMessageCount"] == 500
    assert totals["outputMessageSize"] == sum(len(json.dumps(doc)) for doc in docs)
    messages, _ = writer.sample.recent(SAMPLE)
    assert [m["n"] for m in messages] == list(range(500))[-SAMPLE:]


def test_one_partition_function_serves_every_batch_with_its_own_id(
    spark: Any, stores: SqliteStores, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tasks take the batch id from the action's local property, not from a function
    pickled per batch: each batch's files carry its own id, and the function is built once."""
    files = ConnectionInfo("files", "File", {"directory": str(tmp_path / "files")})
    pipeline = [
        {"$source": {"connectionName": "files", "path": "in"}},
        {"$emit": {"connectionName": "files", "path": "out"}},
    ]
    built: list[Any] = []
    make_udf = partitions.UserDefinedFunction.__init__

    def counted_udf(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(args[0])
        make_udf(self, *args, **kwargs)

    monkeypatch.setattr(partitions.UserDefinedFunction, "__init__", counted_udf)
    writer = processor_writer(stores, pipeline, files)
    sink = ForeachBatchSink(writer, processor="p")
    out = tmp_path / "files" / "out"
    named: dict[int, list[int]] = {}
    for batch_id, first in ((3, 0), (4, 100), (9, 200)):
        sink(envelopes(spark, [{"n": n} for n in range(first, first + 100)], 2), batch_id)
        prefix = f"p-r-{batch_id:012d}-"
        named[batch_id] = sorted(
            line["n"]
            for path in out.iterdir()
            if path.name.startswith(prefix)
            for line in map(json.loads, path.read_text().splitlines())
        )
    assert named == {3: list(range(100)), 4: list(range(100, 200)), 9: list(range(200, 300))}
    assert len(built) == 1
    assert writer.stats.totals["outputMessageCount"] == 300


@pytest.mark.parametrize("on_this_host", [True, False], ids=["executors", "remote-cluster"])
def test_merge_into_local_is_idempotent(
    spark: Any, stores: SqliteStores, tmp_path: Path, on_this_host: bool
) -> None:
    """Executors on this machine write `local` themselves; behind a remote cluster the driver
    writes the batch with the same bulk writer."""
    files = ConnectionInfo("files", "File", {"directory": str(tmp_path)})
    pipeline = [
        {"$source": {"connectionName": "files", "path": "in"}},
        {"$merge": {"into": {"connectionName": "local", "db": "app", "coll": "out"}}},
    ]
    writer = processor_writer(stores, pipeline, files, on_this_host=on_this_host)
    assert writer.partition_sink.on_executors is on_this_host
    sink = ForeachBatchSink(writer, processor="p")
    docs: list[dict[str, Any]] = [{"n": n} for n in range(300)]
    docs[5] = {"n": 5, "bad": {"$date": "not a date"}}  # refused by the store: DLQ
    sink(envelopes(spark, docs, 4), 0)
    sink(envelopes(spark, docs, 2), 0)  # the replay
    stored = stores.documents.find("app", "out", sort=[("n", 1)])
    assert [d["n"] for d in stored] == [n for n in range(300) if n != 5]
    assert stored[0]["_id"] == ObjectId(object_id("p", "d", 0, 0, 0))
    found, total = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    assert total == 1 and found[0]["operatorName"] == "MergeOperator"
    assert writer.stats.totals["outputMessageCount"] == 299
    assert writer.stats.totals["dlqMessageCount"] == 1
