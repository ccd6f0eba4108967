"""`$merge` and `$emit` end to end on the shared SparkSession, and the File source.

Queries are driven batch by batch and polled through their progress (never slept on): the
window operator's processing-time timeouts keep `processAllAvailable` from returning.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from bson import ObjectId

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import object_id
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from pipeline_stages._windowing.runtime.blocking import key_text
from service.runtime.process import StdoutWriter, run_process
from service.runtime.sink_resources import ClusterClients, StoreSinkResources, build_run_sink
from service.stores.sqlite import SqliteStores
from tests.streaming import wait_until

pytestmark = pytest.mark.spark

POLL_TIMEOUT_S = 300.0


def at(seconds: float) -> str:
    return f"2024-01-01T00:00:{seconds:06.3f}Z"


@pytest.fixture
def store(tmp_path: Path) -> Any:
    stores = SqliteStores(tmp_path / "sluice.db")
    yield stores
    stores.close()


def process(spark: Any, pipeline: list[Any], store: Any, **kwargs: Any) -> tuple[int, list[Any]]:
    out, err = io.StringIO(), io.StringIO()
    code = run_process(
        pipeline,
        out=out,
        err=err,
        max_seconds=120,
        spark_factory=lambda: spark,
        connections=kwargs.pop("connections", {}),
        local_store=store.documents,
        **kwargs,
    )
    assert code == 0, err.getvalue()
    return code, [json.loads(line) for line in out.getvalue().splitlines()]


def doc_id(processor: str, seq: int) -> ObjectId:
    """The deterministic `_id` of the document at source position `seq` (`output_key`)."""
    return ObjectId(object_id(processor, "d", 0, seq, 0))


def test_stateless_pipeline_merges_exact_documents_into_local(spark: Any, store: Any) -> None:
    docs = [{"n": 1, "kind": "a"}, {"n": 2, "kind": "b"}, {"_id": "own", "n": 3, "kind": "a"}]
    pipeline = [
        {"$source": {"documents": [*docs, {"n": 4}], "streamMetaFieldName": ""}},
        {"$project": {"_ts": 0}},
        {"$addFields": {"double": {"$multiply": ["$n", 2]}}},
        {
            "$merge": {
                "into": {
                    "connectionName": "local",
                    "db": "app",
                    "coll": {"$concat": ["by_", "$kind"]},
                }
            }
        },
    ]
    _, printed = process(spark, pipeline, store, batch_size=2)
    # The document without `kind` has no target collection: DLQ (printed), the rest merged.
    assert [(p["_dlqMessage"]["operatorName"], p["_dlqMessage"]["doc"]["n"]) for p in printed] == [
        ("MergeOperator", 4)
    ]
    assert store.documents.find("app", "by_a", sort=[("n", 1)]) == [
        {"_id": doc_id("process", 0), "double": 2, "kind": "a", "n": 1},
        {"_id": "own", "double": 6, "kind": "a", "n": 3},
    ]
    assert store.documents.find("app", "by_b") == [
        {"_id": doc_id("process", 1), "double": 4, "kind": "b", "n": 2}
    ]


def test_merge_write_errors_go_to_the_dlq_and_the_query_continues(spark: Any, store: Any) -> None:
    docs = [
        {"_id": 1, "k": "a", "v": 1},
        {"_id": 2, "k": "b", "v": 2},
        {"_id": 3, "k": "a", "v": 3},  # replaces k=a with another _id: refused
        {"_id": 4, "k": "c", "v": 4},
    ]
    pipeline = [
        {"$source": {"documents": docs, "streamMetaFieldName": ""}},
        {"$project": {"_ts": 0}},
        {
            "$merge": {
                "into": {"connectionName": "local", "db": "app", "coll": "byk"},
                "on": "k",
                "whenMatched": "replace",
            }
        },
    ]
    _, printed = process(spark, pipeline, store, batch_size=1)
    assert len(printed) == 1
    record = printed[0]["_dlqMessage"]
    assert (record["operatorName"], record["doc"]) == ("MergeOperator", docs[2])
    assert "_id" in record["errInfo"]["reason"]
    assert store.documents.find("app", "byk", sort=[("_id", 1)]) == [
        {"_id": 1, "k": "a", "v": 1},
        {"_id": 2, "k": "b", "v": 2},
        {"_id": 4, "k": "c", "v": 4},
    ]


# --------------------------------------------------------------------------- driven queries


class Recorder(StdoutWriter):
    """`sluice process`'s writer (sink first, then print), remembering batch ids."""

    def __init__(self, sink: Any) -> None:
        super().__init__(io.StringIO(), print_outputs=False, sink=sink)
        self.batch_ids: list[int] = []
        self.outputs: dict[int, list[str]] = {}
        #: The query's `foreachBatch` sink (`start`).
        self.foreach_sink: Any = None

    def write(self, batch: Any) -> None:
        super().write(batch)
        self.batch_ids.append(batch.batch_id)
        if batch.outputs:
            self.outputs[batch.batch_id] = [o.doc_json for o in batch.outputs]


def start(
    spark: Any,
    pipeline: list[Any],
    *,
    checkpoint: Path,
    resources: StoreSinkResources,
    processor: str,
    connections: dict[str, ConnectionInfo] | None = None,
) -> tuple[Any, Recorder]:
    register_all(spark)
    parsed = parse_pipeline(pipeline)
    ctx = CompileContext(
        spark=spark,
        processor_name=processor,
        problems=ProblemCollector(),
        has_dlq=True,
        connections=connections or {},
        batch_size=1,
    )
    compiled = compile_pipeline(parsed, ctx)
    sink = build_run_sink(parsed, resources, processor=processor, run_tag="t")
    recorder = Recorder(sink)
    recorder.foreach_sink = compiled.foreach_batch(
        recorder, processor=processor, state_dir=f"{checkpoint}-window"
    )
    query = (
        compiled.envelopes.writeStream.foreachBatch(recorder.foreach_sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    return query, recorder


def wait_for(query: Any, done: Callable[[], bool]) -> None:
    wait_until(query, done, "the query to get there", POLL_TIMEOUT_S)


def stop(query: Any, recorder: Recorder) -> None:
    """Stop the query, then wait for its last batch's write (`ForeachBatchSink.close`)."""
    query.stop()
    recorder.foreach_sink.close()


def end_offset(query: Any) -> dict[str, Any] | None:
    progress = query.lastProgress
    if not progress or not progress.get("sources"):
        return None
    end = progress["sources"][0].get("endOffset")
    return json.loads(end) if isinstance(end, str) else end


WINDOW_DOCS = [
    {"g": "x", "v": 1, "ts": at(0.5)},
    {"g": "y", "v": 2, "ts": at(1.5)},
    {"g": "x", "v": 4, "ts": at(2.2)},  # closes [0, 2)
    {"g": "x", "v": 8, "ts": at(4.5)},  # closes [2, 4)
]
WINDOW_PIPELINE = [
    {
        "$source": {
            "documents": WINDOW_DOCS,
            "timeField": {"$dateFromString": {"dateString": "$ts"}},
        }
    },
    {
        "$tumblingWindow": {
            "interval": {"size": 2, "unit": "second"},
            "allowedLateness": 0,
            "pipeline": [{"$group": {"_id": "$g", "total": {"$sum": "$v"}}}],
        }
    },
    {
        "$project": {
            "_id": 0,
            "group": "$_id",
            "total": 1,
            "start": {"$meta": "stream.window.start"},
        }
    },
    {"$merge": {"into": {"connectionName": "local", "db": "app", "coll": "windows"}}},
]


def test_window_results_merge_with_deterministic_ids_and_a_replay_changes_nothing(
    spark: Any, store: Any, tmp_path: Path
) -> None:
    resources = StoreSinkResources(local=store.documents, connections={}, clients=ClusterClients())
    checkpoint = tmp_path / "checkpoint"
    query, recorder = start(
        spark, WINDOW_PIPELINE, checkpoint=checkpoint, resources=resources, processor="w"
    )
    try:
        wait_for(query, lambda: (end_offset(query) or {}).get("index") == len(WINDOW_DOCS))
    finally:
        stop(query, recorder)
    stored = store.documents.find("app", "windows", sort=[("start", 1), ("group", 1)])
    windows = [(d["group"], d["total"]) for d in stored]
    assert windows == [("x", 1), ("y", 2), ("x", 4)]
    ms = 1_704_067_200_000
    first = stored[0]
    assert first["_id"] == ObjectId(object_id("w", "w", ms, key_text("x")))
    # A crash after the sink wrote the batch that closed [2, 4) but before Spark committed
    # it: its commit (and everything Spark logged after it) is gone, so it runs again.
    replayed = max(recorder.outputs)
    for log in ("commits", "offsets"):
        for entry in (checkpoint / log).iterdir():
            number = entry.name.lstrip(".").split(".")[0]
            if number.isdigit() and (
                int(number) > replayed or (log == "commits" and int(number) == replayed)
            ):
                entry.unlink()
    query, again = start(
        spark, WINDOW_PIPELINE, checkpoint=checkpoint, resources=resources, processor="w"
    )
    try:
        wait_for(query, lambda: replayed in again.batch_ids)
    finally:
        stop(query, again)
    assert again.outputs[replayed] == recorder.outputs[replayed]  # the same results again
    assert store.documents.find("app", "windows", sort=[("start", 1), ("group", 1)]) == stored


def test_file_source_to_file_emit_picks_up_new_files(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "files"
    (root / "in").mkdir(parents=True)
    files = ConnectionInfo("files", "File", {"directory": str(root)})
    pipeline = [
        {"$source": {"connectionName": "files", "path": "in", "streamMetaFieldName": ""}},
        {"$project": {"_ts": 0}},
        {"$addFields": {"line": {"$meta": "stream.source.line"}}},
        {"$emit": {"connectionName": "files", "path": "out"}},
    ]
    resources = StoreSinkResources(
        local=lambda: None,  # type: ignore[arg-type,return-value]
        connections={"files": files},
        clients=ClusterClients(),
    )
    (root / "in" / "001.jsonl").write_text('{"n": 1}\n{"n": 2}\n', encoding="utf-8")
    query, _ = start(
        spark,
        pipeline,
        checkpoint=tmp_path / "checkpoint",
        resources=resources,
        processor="f",
        connections={"files": files},
    )
    try:
        wait_for(query, lambda: (end_offset(query) or {}).get("seq") == 2)
        (root / "in" / "002.jsonl").write_text('{"n": 3}\nnot json\n', encoding="utf-8")
        wait_for(query, lambda: (end_offset(query) or {}).get("seq") == 4)
    finally:
        query.stop()
    written = sorted((root / "out").iterdir())
    assert all(p.name.startswith("f-t-") and p.suffix == ".jsonl" for p in written)
    lines = [json.loads(line) for p in written for line in p.read_text().splitlines()]
    assert lines == [{"n": 1, "line": 1}, {"n": 2, "line": 2}, {"n": 3, "line": 1}]
    assert not [p for p in (root / "out").iterdir() if p.name.startswith(".")]
