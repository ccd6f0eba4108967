"""`find_by_keys` (the `$lookup` port) on every lane: what one batched `$in` returns.

The caller (`_enrichment.matching`) re-matches the rows with MQL's rules, so a store may
return a superset; these tests check that nothing that matches is missed, through each
access path (the `_id` index, a single-field unique index, a scan) and that the MongoDB
adapter builds one `{field: {$in: keys}}` query.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from bson import ObjectId

from pipeline_stages._documents.values import sort_key
from pipeline_stages._enrichment.matching import ForeignIndex, local_keys

OID = ObjectId("65a1b2c3d4e5f60718293a4b")
WHEN = datetime(2024, 1, 1, tzinfo=UTC)
DOCS = [
    {"_id": 1, "sku": "a", "tags": ["x", "y"], "n": 1},
    {"_id": 2, "sku": "b", "tags": ["y"], "n": 2.0},
    {"_id": 3, "sku": None, "n": 3},
    {"_id": 4, "n": 4, "when": WHEN},
    {"_id": OID, "sku": "c", "n": 1.0},
    {"_id": "s", "sku": ["a", "c"]},
]


@pytest.fixture
def docs(harness):
    store = harness.stores.documents
    store.merge(harness.db, "products", DOCS)
    return store


def matched(docs, db, field, local):
    found = docs.find_by_keys(db, "products", field, local_keys(local))
    return sorted(
        (d["_id"] for d in ForeignIndex(found, field).matches(local_keys(local))), key=sort_key
    )


@pytest.mark.parametrize(
    ("local", "expected"),
    [(1, [1]), (1.0, [1]), ([2, "s"], [2, "s"]), (OID, [OID]), (99, [])],
)
def test_by_id(docs, harness, local, expected) -> None:
    assert matched(docs, harness.db, "_id", local) == sorted(expected, key=sort_key)


@pytest.mark.parametrize(
    ("field", "local", "expected"),
    [
        ("sku", "a", [1, "s"]),  # a foreign array matches by element
        ("sku", ["b", "c"], [2, OID, "s"]),
        ("sku", None, [3, 4]),  # null matches null and missing
        ("tags", "y", [1, 2]),
        ("n", 1, [1, OID]),  # numbers by value
        ("n", 2, [2]),
        ("when", WHEN, [4]),
    ],
)
def test_by_field_scan(docs, harness, field, local, expected) -> None:
    assert matched(docs, harness.db, field, local) == sorted(expected, key=sort_key)


def test_by_unique_index(docs, harness) -> None:
    docs.merge(harness.db, "users", [{"_id": i, "email": f"u{i}@x"} for i in range(5)])
    docs.ensure_unique_index(harness.db, "users", ["email"])
    found = docs.find_by_keys(harness.db, "users", "email", ["u1@x", "u3@x", "nope"])
    assert sorted(d["_id"] for d in found) == [1, 3]


def test_no_keys_no_query(docs, harness) -> None:
    assert docs.find_by_keys(harness.db, "products", "sku", []) == []


def test_many_keys_in_one_call(docs, harness) -> None:
    keys = list(range(2000))
    found = docs.find_by_keys(harness.db, "products", "_id", keys)
    assert sorted(d["_id"] for d in found if isinstance(d["_id"], int)) == [1, 2, 3, 4]


def test_let_pipeline_query_as_the_runner_builds_it(docs, harness) -> None:
    """`$match` with `$expr` over a bound `$$variable` (`{$literal: ...}`), sort and limit."""
    from pipeline_stages._enrichment.lookup_runner import _StoreQuery

    # The `$exists` guard first: the SQLite store evaluates `$expr` with mongomock, which
    # fails on a field the document lacks (MongoDB reads it as missing).
    pipeline = (
        {"$match": {"n": {"$exists": True}, "_id": {"$type": "number"}}},
        {"$match": {"$expr": {"$lt": ["$n", "$$top"]}}},
        {"$sort": {"n": -1}},
        {"$limit": 2},
        {"$project": {"_id": 0, "n": 1}},
    )
    query = _StoreQuery.of(pipeline, {"top": 3})
    found = docs.find(
        harness.db,
        "products",
        query.filter(),
        sort=query.sort,
        skip=query.skip,
        limit=query.limit,
    )
    assert [query.project(d) for d in found] == [{"n": 2.0}, {"n": 1}]
