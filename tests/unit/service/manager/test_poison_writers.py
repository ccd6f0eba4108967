"""A document's content never fails a batch in the writers (no Spark; SQLite stores): the DLQ
stores what its store refuses in a safe form, and stats count only what a sink wrote."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bson.errors import InvalidDocument as BsonInvalidDocument

from pipeline_stages import parse_pipeline
from pipeline_stages._connectors.sinks.ids import sink_dlq_record
from pipeline_stages._stream.batch import BatchResult, Output, dlq_record
from service.manager.stats import LiveStats
from service.manager.writers import DlqWriter, ProcessorWriter, SampleBuffer
from service.runtime.sink_resources import ClusterClients, StoreSinkResources, build_run_sink
from service.stores import DlqQuery, DlqStore, Stores, open_stores

NOW = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_stores(data_dir=tmp_path)
    yield opened
    opened.close()


def record(n: int, doc: Any) -> dict[str, Any]:
    return {
        "_id": {"$oid": f"{n:024x}"},
        "_stream_meta": {"source": {"type": "httpIngest", "seq": n}},
        "errInfo": {"reason": "boom"},
        "operatorName": "AddFieldsOperator",
        "doc": doc,
        "processorName": "p",
        "dlqTime": {"$date": "2024-01-01T00:00:05.000Z"},
    }


def stored(stores: Stores) -> list[dict[str, Any]]:
    docs, _ = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    return sorted(docs, key=lambda d: d["_id"])


def test_a_record_the_dlq_store_cannot_encode_is_stored_with_its_doc_as_text(
    stores: Stores,
) -> None:
    writer = DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws")
    writer.write([record(1, {"s": "\ud800"}), record(2, {"ok": True})])
    first, second = stored(stores)
    assert "doc" not in first and json.loads(first["docText"]) == {"s": "\ud800"}
    assert first["errInfo"] == {"reason": "boom"} and first["operatorName"] == "AddFieldsOperator"
    assert second["doc"] == {"ok": True}


class _Refusing:
    """A DLQ store refusing records with a `doc` the way pymongo refuses a document BSON
    cannot hold, or failing as a store that is down."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.kept: list[dict[str, Any]] = []

    def upsert_many(self, processor: str, docs: Sequence[dict[str, Any]]) -> None:
        del processor
        if self.error is not None:
            raise self.error
        if any("doc" in doc for doc in docs):
            raise BsonInvalidDocument("BSON document too large (17000000 bytes)")
        self.kept.extend(docs)


def test_a_record_the_cluster_refuses_is_stored_with_its_doc_as_text() -> None:
    store = _Refusing()
    DlqWriter(lambda: store, processor="p", instance="ws").write([record(1, {"big": "x"})])  # type: ignore[arg-type,return-value]
    (kept,) = store.kept
    assert kept["docText"] == '{"big": "x"}' and kept["_id"] == f"{1:024x}"


@pytest.mark.parametrize(
    "error", [ConnectionError("cluster down"), sqlite3.OperationalError("disk I/O error")]
)
def test_a_store_that_fails_still_fails_the_batch(error: Exception) -> None:
    store = _Refusing(error)
    writer = DlqWriter(lambda: store, processor="p", instance="ws")  # type: ignore[arg-type,return-value]
    with pytest.raises(type(error)):
        writer.write([record(1, {"a": 1})])


def _row(doc: str) -> dict[str, Any]:
    return {"meta": None, "part": 0, "seq": 1, "sub": 0, "operator": "X", "reason": "r",
            "doc": doc, "missed": None}  # fmt: skip


def test_a_document_too_deep_for_a_bson_record_is_kept_as_text() -> None:
    # A record is a BSON document of at most 100 levels, its `doc` one of them.
    fits = '{"a":' + "[" * 98 + "]" * 98 + "}"
    held = dlq_record(_row(fits), processor="p", now=NOW)
    assert held["doc"] == json.loads(fits)
    text = '{"a":' + "[" * 99 + "]" * 99 + "}"
    too_deep = dlq_record(_row(text), processor="p", now=NOW)
    assert "doc" not in too_deep and too_deep["docText"] == text
    from_sink = sink_dlq_record(text, key="k", reason="r", operator="O", processor="p", now=NOW)
    assert "doc" not in from_sink and from_sink["docText"] == text


def test_output_message_count_counts_only_what_the_sink_wrote(stores: Stores) -> None:
    into = {"connectionName": "local", "db": "app", "coll": "$c"}
    parsed = parse_pipeline(
        [{"$source": {"connectionName": "sample_stream_solar"}}, {"$merge": {"into": into}}]
    )
    resources = StoreSinkResources(local=stores.documents, connections={}, clients=ClusterClients())
    stats = LiveStats()
    writer = ProcessorWriter(
        generation=1,
        stats=stats,
        sample=SampleBuffer(stores.documents, "abc", capacity=10),
        dlq=DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws"),
        sink=build_run_sink(parsed, resources, processor="p", run_tag="t"),
    )
    batch = BatchResult(batch_id=0)
    targets = ["ok", "a/../b", "system.x", "ok"]
    batch.outputs = [
        Output(json.dumps({"i": i}), f"{i + 1:024x}", {"coll": coll})
        for i, coll in enumerate(targets)
    ]
    batch.order = [("out", i) for i in range(len(targets))]
    writer.write(batch)
    assert sorted(d["i"] for d in stores.documents.find("app", "ok")) == [0, 3]
    assert stores.documents.find("app", "a/../b") == []
    reasons = [d["errInfo"]["reason"] for d in stored_dlq(stores)]
    assert sorted(reasons) == [
        "Failed to process input document in MergeOperator with error: invalid collection "
        "name 'a/../b': it holds '/' (no $ / \\ or NUL allowed)",
        "Failed to process input document in MergeOperator with error: invalid collection "
        "name 'system.x': 'system.' names are reserved",
    ]
    snapshot = stats.snapshot()
    assert snapshot["outputMessageCount"] == 2 and snapshot["dlqMessageCount"] == 2
    assert snapshot["outputMessageSize"] == len(b'{"i": 0}') + len(b'{"i": 3}')


def stored_dlq(stores: Stores) -> list[dict[str, Any]]:
    store: DlqStore = stores.dlq("d", "dlq")
    docs, _ = store.find(DlqQuery(processor="p"))
    return docs
