"""MongoDB-only checks, all on mongomock or stubs: they pin what ``MongoStores`` *sends*.

Nothing here talks to a MongoDB server. ``*-query-construction-only`` in a test id means the
test checks documents, filters and operations built for the server, not the server's answer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import mongomock
import pytest
from pymongo import DeleteOne, ReplaceOne, UpdateOne
from pymongo.errors import BulkWriteError

from service.stores import DlqQuery, InvalidQuery, ProcessorRecord, StoreError
from service.stores.mongo import MongoDlqStore, MongoStores
from service.stores.mongo_bulk import (
    BulkOutcome,
    WriteOp,
    bulk_write_unordered,
    emulate_bulk_write_unordered,
)
from tests.contract.conftest import make_box

T0 = datetime(2024, 5, 1, tzinfo=UTC)
ATLAS_DLQ_KEYS = {
    "_id",
    "_stream_meta",
    "errInfo",
    "operatorName",
    "doc",
    "processorName",
    "dlqTime",
}


@pytest.fixture
def client() -> Any:
    return mongomock.MongoClient(tz_aware=True)


@pytest.fixture
def stores(client) -> MongoStores:
    return MongoStores(
        client["sluice"], secrets=make_box(), bulk_writer=emulate_bulk_write_unordered
    )


def test_dlq_documents_are_stored_raw_in_atlas_shape_query_construction_only(client, stores):
    doc = {
        "_id": "p1:batch7:3",
        "_stream_meta": {"source": {"type": "kafka"}},
        "errInfo": {"reason": "Input document arrived late."},
        "operatorName": "GroupOperator",
        "doc": {"a": 1},
        "processorName": "p1",
        "dlqTime": T0,
    }
    stores.dlq("dlqdb", "dlq").upsert_many("p1", [doc])
    raw = client["dlqdb"]["dlq"].find_one()
    assert set(raw) == ATLAS_DLQ_KEYS and raw["_id"] == "p1:batch7:3"
    assert isinstance(raw["dlqTime"], datetime) and raw["dlqTime"] == T0
    indexed = [
        tuple(k for k, _ in spec["key"])
        for spec in client["dlqdb"]["dlq"].index_information().values()
    ]
    assert ("processorName", "dlqTime", "_id") in indexed
    assert ("processorName", "errInfo.reason", "dlqTime") in indexed


def test_dlq_query_is_anded_with_the_user_filter_query_construction_only():
    seen: list[dict[str, Any]] = []

    class Recorder:
        def create_index(self, *_: Any, **__: Any) -> None:
            pass

        def count_documents(self, where: dict[str, Any]) -> int:
            seen.append(where)
            return 0

    query = DlqQuery(processor="p1", reason="r", dlq_time_from=T0, filter={"doc.a": {"$in": [1]}})
    MongoDlqStore(Recorder()).count(query)  # type: ignore[arg-type]
    assert seen == [
        {
            "$and": [
                {"processorName": "p1", "errInfo.reason": "r", "dlqTime": {"$gte": T0}},
                {"doc.a": {"$in": [1]}},
            ]
        }
    ]


def test_processor_documents_keep_the_pipeline_as_text_query_construction_only(client, stores):
    record = ProcessorRecord.new(name="p1", pipeline_json='[{"b":1,"a":2.0}]', options={}, now=T0)
    stores.processors.create(record)
    raw = client["sluice"]["processors"].find_one()
    assert raw["_id"] == record.id and raw["pipeline_json"] == '[{"b":1,"a":2.0}]'
    assert raw["state"] == "CREATED" and raw["version"] == 1 and raw["created_at"] == T0
    unique = [
        s for s in client["sluice"]["processors"].index_information().values() if s.get("unique")
    ]
    assert [s["key"] for s in unique] == [[("name", 1)]]


def test_metadata_collections_are_not_writable_through_user_namespaces(stores):
    with pytest.raises(InvalidQuery):
        stores.documents.merge("sluice", "processors", [{"_id": 1}])
    with pytest.raises(InvalidQuery):
        stores.dlq("sluice", "connections")
    stores.documents.merge("sluice", "results", [{"_id": 1}])  # the rest of the database is usable


def test_a_client_without_tz_aware_is_refused():
    with pytest.raises(ValueError, match="tz_aware"):
        MongoStores(mongomock.MongoClient()["sluice"])


def test_from_uri_uses_the_default_database(monkeypatch):
    monkeypatch.setattr("service.stores.mongo.MongoClient", mongomock.MongoClient)
    box = make_box()
    assert MongoStores.from_uri("mongodb://h:27017/meta", secrets=box).database.name == "meta"
    assert MongoStores.from_uri("mongodb://h:27017", secrets=box).database.name == "sluice"


class RecordingWriter:
    """A bulk writer that records the operations, then applies them with the emulation."""

    def __init__(self) -> None:
        self.rounds: list[list[WriteOp]] = []

    def __call__(self, collection: Any, ops: Any) -> BulkOutcome:
        self.rounds.append(list(ops))
        return emulate_bulk_write_unordered(collection, ops)


@pytest.mark.parametrize(
    ("when_matched", "when_not_matched", "expected"),
    [
        ("replace", "insert", [[WriteOp("replace", {"_id": 1}, {"_id": 1, "a": 2}, upsert=True)]]),
        ("replace", "discard", [[WriteOp("replace", {"_id": 1}, {"_id": 1, "a": 2})]]),
        (
            "merge",
            "insert",
            [[WriteOp("update", {"_id": 1}, {"$set": {"_id": 1, "a": 2}}, upsert=True)]],
        ),
        ("merge", "discard", [[WriteOp("update", {"_id": 1}, {"$set": {"_id": 1, "a": 2}})]]),
        (
            "keepExisting",
            "insert",
            [[WriteOp("update", {"_id": 1}, {"$setOnInsert": {"_id": 1, "a": 2}}, upsert=True)]],
        ),
        ("keepExisting", "discard", []),
        ("delete", "discard", [[WriteOp("delete", {"_id": 1})]]),
        (
            "delete",
            "insert",
            [
                [WriteOp("update", {"_id": 1}, {"$setOnInsert": {"_id": 1, "a": 2}}, upsert=True)],
                [WriteOp("delete", {"_id": 1})],
            ],
        ),
    ],
)
def test_merge_builds_the_documented_operations_query_construction_only(
    client, when_matched, when_not_matched, expected
):
    writer = RecordingWriter()
    store = MongoStores(client["sluice"], secrets=make_box(), bulk_writer=writer)
    store.documents.merge("u", "c", [{"_id": 1, "a": 0}], when_matched="replace")
    writer.rounds.clear()
    store.documents.merge(
        "u", "c", [{"_id": 1, "a": 2}], when_matched=when_matched, when_not_matched=when_not_matched
    )
    assert writer.rounds == expected


def test_repeated_keys_go_to_separate_rounds_query_construction_only(client):
    writer = RecordingWriter()
    store = MongoStores(client["sluice"], secrets=make_box(), bulk_writer=writer)
    store.documents.merge("u", "c", [{"_id": 1, "v": 1}, {"_id": 2}, {"_id": 1, "v": 2}])
    assert [[op.filter for op in ops] for ops in writer.rounds] == [
        [{"_id": 1}, {"_id": 2}],
        [{"_id": 1}],
    ]


class StubCollection:
    """Stands in for a pymongo collection whose bulk_write reports partial failure."""

    def __init__(self, details: dict[str, Any]) -> None:
        self.details = details
        self.calls: list[tuple[list[Any], bool]] = []

    def bulk_write(self, ops: list[Any], *, ordered: bool) -> Any:
        self.calls.append((ops, ordered))
        raise BulkWriteError(self.details)


def test_bulk_write_unordered_sends_pymongo_ops_and_maps_errors_query_construction_only():
    details = {
        "writeErrors": [{"index": 1, "code": 11000, "errmsg": "E11000 duplicate key error"}],
        "writeConcernErrors": [],
        "nInserted": 0,
        "nUpserted": 1,
        "nMatched": 2,
        "nModified": 1,
        "nRemoved": 1,
        "upserted": [{"index": 0, "_id": 5}],
    }
    stub = StubCollection(details)
    ops = [
        WriteOp("replace", {"_id": 5}, {"_id": 5, "a": 1}, upsert=True),
        WriteOp("update", {"k": "a"}, {"$set": {"k": "a"}}),
        WriteOp("delete", {"_id": 7}),
    ]
    outcome = bulk_write_unordered(stub, ops)  # type: ignore[arg-type]
    [(sent, ordered)] = stub.calls
    assert ordered is False
    assert sent == [
        ReplaceOne({"_id": 5}, {"_id": 5, "a": 1}, upsert=True),
        UpdateOne({"k": "a"}, {"$set": {"k": "a"}}, upsert=False),
        DeleteOne({"_id": 7}),
    ]
    assert outcome == BulkOutcome(
        inserted=1,
        matched=2,
        deleted=1,
        upserted=frozenset({0}),
        errors={1: "E11000 duplicate key error"},
    )


def test_write_concern_errors_fail_the_batch_query_construction_only():
    stub = StubCollection(
        {"writeErrors": [], "writeConcernErrors": [{"errmsg": "timeout"}], "upserted": []}
    )
    with pytest.raises(StoreError) as err:
        bulk_write_unordered(stub, [WriteOp("delete", {"_id": 1})])  # type: ignore[arg-type]
    assert err.value.code == "write_concern"
