"""Contract: the `$merge` / collection `$emit` writers on every store lane.

Lanes come from `conftest.py`: `sqlite` (the embedded `local` store, end to end),
`mongo-mongomock-query-construction-only` (the writes `MongoDocumentStore` builds, run by
mongomock: no server behaviour is tested there) and `mongo-real` (skipped visibly unless
`MONGODB_URI` is set).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from bson import ObjectId

from pipeline_stages._connectors.sinks.collection_writer import CollectionEmitWriter, unseen
from pipeline_stages._connectors.sinks.merge_writer import MergeWriter
from pipeline_stages._connectors.sinks.plans import CollectionEmitPlan, MergePlan, Name
from pipeline_stages._stream.batch import BatchResult, Output

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def batch(batch_id: int, *outputs: Output) -> BatchResult:
    result = BatchResult(batch_id=batch_id)
    result.outputs = list(outputs)
    result.order = [("out", i) for i in range(len(outputs))]
    return result


def out(doc: dict[str, Any], key: str, target: dict[str, Any] | None = None) -> Output:
    return Output(json.dumps(doc), key, target)


def merge_writer(harness: Any, **plan: Any) -> MergeWriter:
    fields = {"connection": "c", "connection_type": "Local", "db": Name(harness.db), **plan}
    fields.setdefault("coll", Name("out"))
    return MergeWriter(
        MergePlan(**fields),
        open_store=lambda: harness.stores.documents,
        processor="p",
        embedded=harness.lane == "sqlite",
        clock=lambda: NOW,
    )


def key(n: int) -> str:
    return f"{n:024x}"


def test_merge_writer_assigns_deterministic_ids_and_a_replay_changes_nothing(harness):
    writer = merge_writer(harness)
    first = batch(0, out({"a": 1}, key(1)), out({"_id": "mine", "a": 2}, key(2)))
    assert writer.write(first) == []
    docs = harness.stores.documents.find(harness.db, "out", sort=[("a", 1)])
    assert docs == [{"_id": ObjectId(key(1)), "a": 1}, {"_id": "mine", "a": 2}]
    assert writer.write(first) == []  # Spark replays the batch after a crash
    assert harness.stores.documents.find(harness.db, "out", sort=[("a", 1)]) == docs


def test_merge_writer_sends_duplicate_keys_on_on_fields_to_the_dlq(harness):
    if harness.lane != "sqlite":  # a Cluster target needs the index; `local` creates it
        harness.stores.documents.ensure_unique_index(harness.db, "out", ["k"])
    writer = merge_writer(harness, on=("k",), when_matched="replace")
    harness.stores.documents.merge(harness.db, "out", [{"_id": 1, "k": "a"}, {"_id": 2, "k": "b"}])
    # Replacing k=a with a document that changes its _id to 2's is refused per document.
    dlq = writer.write(
        batch(3, out({"_id": 2, "k": "a", "v": 1}, key(1)), out({"k": "c", "v": 3}, key(2)))
    )
    assert [(r["operatorName"], r["doc"]) for r in dlq] == [
        ("MergeOperator", {"_id": 2, "k": "a", "v": 1})
    ]
    assert dlq[0]["errInfo"]["reason"].startswith(
        "Failed to process input document in MergeOperator with error: "
    )
    assert harness.stores.documents.count(harness.db, "out", {"k": "c"}) == 1
    assert dlq == writer.write(
        batch(3, out({"_id": 2, "k": "a", "v": 1}, key(1)), out({"k": "c", "v": 3}, key(2)))
    )  # the replay's records have the same ids (the DLQ keeps the first)


def test_merge_writer_routes_computed_targets_and_dlqs_bad_ones(harness):
    writer = merge_writer(harness, coll=Name(None, "$kind", ("into", "coll")))
    dlq = writer.write(
        batch(
            0,
            out({"n": 1}, key(1), {"coll": "left"}),
            out({"n": 2}, key(2), {"coll": "right"}),
            out({"n": 3}, key(3), {"coll": 42}),
            out({"n": 4}, key(4), {"coll": "bad$name"}),
        )
    )
    assert [doc["n"] for doc in harness.stores.documents.find(harness.db, "left")] == [1]
    assert [doc["n"] for doc in harness.stores.documents.find(harness.db, "right")] == [2]
    assert [(r["doc"]["n"], r["operatorName"]) for r in dlq] == [
        (3, "MergeOperator"),
        (4, "MergeOperator"),
    ]
    assert "into.coll must evaluate to a non-empty string, got 42" in dlq[0]["errInfo"]["reason"]


def test_merge_writer_without_a_unique_index_dlqs_the_namespace(harness):
    if harness.lane == "sqlite":
        pytest.skip("`local` creates the unique index itself (no other way to create one)")
    writer = merge_writer(harness, on=("k",))
    dlq = writer.write(batch(0, out({"k": 1}, key(1)), out({"k": 2}, key(2))))
    assert len(dlq) == 2
    assert "needs a unique index" in dlq[0]["errInfo"]["reason"]


def test_collection_emit_upserts_by_deterministic_id(harness):
    writer = CollectionEmitWriter(
        CollectionEmitPlan("c", "Local", Name(harness.db), Name("events")),
        open_store=lambda: harness.stores.documents,
        open_client=None,
        processor="p",
        embedded=True,
        clock=lambda: NOW,
    )
    one = batch(0, out({"v": 1, "t": {"$date": "2024-01-01T00:00:00Z"}}, key(1)))
    assert writer.write(one) == [] and writer.write(one) == []
    assert harness.stores.documents.find(harness.db, "events") == [
        {"_id": ObjectId(key(1)), "v": 1, "t": NOW}
    ]


def test_time_series_dedupe_query_finds_stored_id_time_pairs_query_construction_only(harness):
    """`unseen` builds one bounded `find`; checked on mongomock/real, not on SQLite."""
    if harness.lane == "sqlite":
        pytest.skip("time-series collections exist on MongoDB only")
    client = harness.stores.documents._client  # the lane's pymongo-compatible client
    collection = client[harness.db]["ts"]
    collection.insert_one({"_id": 1, "t": NOW})
    pending = [(0, {"_id": 1, "t": NOW}), (1, {"_id": 2, "t": NOW}), (2, {"_id": 3})]
    assert [i for i, _ in unseen(collection, pending, "t")] == [1, 2]
