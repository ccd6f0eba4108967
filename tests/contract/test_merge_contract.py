"""Contract: ``DocumentStore.merge`` has MongoDB ``$merge`` semantics in every lane."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId

from service.stores import InvalidQuery, MissingUniqueIndex, StoreError

T0 = datetime(2024, 5, 1, tzinfo=UTC)
EXISTING = [{"_id": 1, "a": 1, "b": 1}, {"_id": 3, "a": 3}]
INPUT = [{"_id": 1, "a": 2, "c": 3}, {"_id": 2, "a": 5}]
UNTOUCHED = {"_id": 3, "a": 3}

# (whenMatched, whenNotMatched) -> (inserted, updated, deleted), documents 1 and 2 afterwards
MATRIX = {
    ("replace", "insert"): ((1, 1, 0), [{"_id": 1, "a": 2, "c": 3}, {"_id": 2, "a": 5}]),
    ("replace", "discard"): ((0, 1, 0), [{"_id": 1, "a": 2, "c": 3}]),
    ("merge", "insert"): ((1, 1, 0), [{"_id": 1, "a": 2, "b": 1, "c": 3}, {"_id": 2, "a": 5}]),
    ("merge", "discard"): ((0, 1, 0), [{"_id": 1, "a": 2, "b": 1, "c": 3}]),
    ("keepExisting", "insert"): ((1, 0, 0), [{"_id": 1, "a": 1, "b": 1}, {"_id": 2, "a": 5}]),
    ("keepExisting", "discard"): ((0, 0, 0), [{"_id": 1, "a": 1, "b": 1}]),
    ("delete", "insert"): ((1, 0, 1), [{"_id": 2, "a": 5}]),
    ("delete", "discard"): ((0, 0, 1), []),
}


@pytest.fixture
def docs(harness):
    return harness.stores.documents


@pytest.fixture
def db(harness):
    return harness.db


def all_docs(docs, db, coll="out"):
    return docs.find(db, coll, sort=[("_id", 1)])


@pytest.mark.parametrize(
    ("when_matched", "when_not_matched"), [pytest.param(*k, id="-".join(k)) for k in MATRIX]
)
def test_every_mode_combination_on_id(docs, db, when_matched, when_not_matched):
    docs.merge(db, "out", EXISTING)
    result = docs.merge(
        db, "out", INPUT, when_matched=when_matched, when_not_matched=when_not_matched
    )
    counts, expected = MATRIX[(when_matched, when_not_matched)]
    assert (result.inserted, result.updated, result.deleted) == counts
    assert result.errors == ()
    assert all_docs(docs, db) == sorted([*expected, UNTOUCHED], key=lambda d: d["_id"])


def test_defaults_are_on_id_merge_insert(docs, db):
    docs.merge(db, "out", EXISTING)
    result = docs.merge(db, "out", INPUT)
    assert (result.inserted, result.updated) == (1, 1)
    assert all_docs(docs, db)[0] == {"_id": 1, "a": 2, "b": 1, "c": 3}


def test_replace_keeps_field_order_of_the_new_document(docs, db):
    docs.merge(db, "out", [{"_id": 1, "z": 1, "a": 2}])
    docs.merge(db, "out", [{"_id": 1, "m": 1, "b": 2, "a": 3}], when_matched="replace")
    assert list(all_docs(docs, db)[0]) == ["_id", "m", "b", "a"]


def test_a_document_without_id_gets_an_object_id(docs, db):
    result = docs.merge(db, "out", [{"v": 1}, {"v": 2}])
    assert result.inserted == 2
    stored = docs.find(db, "out", sort=[("v", 1)])
    assert [type(d["_id"]) for d in stored] == [ObjectId, ObjectId]
    assert stored[0]["_id"] != stored[1]["_id"]


def test_repeated_keys_in_one_batch_apply_in_order(docs, db):
    result = docs.merge(db, "out", [{"_id": 1, "a": 1}, {"_id": 1, "b": 2}, {"_id": 1, "a": 3}])
    assert (result.inserted, result.updated) == (1, 2)
    assert all_docs(docs, db) == [{"_id": 1, "a": 3, "b": 2}]
    result = docs.merge(db, "out", [{"_id": 9}, {"_id": 9}, {"_id": 9}], when_matched="delete")
    assert (result.inserted, result.deleted) == (2, 1)  # insert, delete, insert
    assert docs.count(db, "out", {"_id": 9}) == 1


def test_numerically_equal_ids_match(docs, db):
    docs.merge(db, "out", [{"_id": 1, "a": 1}])
    result = docs.merge(db, "out", [{"_id": 1.0, "b": 2}])
    assert (result.inserted, result.updated) == (0, 1)
    assert docs.count(db, "out") == 1


def test_on_other_fields_needs_a_unique_index(docs, db):
    with pytest.raises(MissingUniqueIndex) as err:
        docs.merge(db, "out", [{"k": "a"}], on=["k"])
    assert err.value.code == "missing_unique_index"
    docs.ensure_unique_index(db, "out", ["k", "j"])
    with pytest.raises(MissingUniqueIndex):
        docs.merge(db, "out", [{"k": "a"}], on=["k"])  # a wider index does not count


@pytest.mark.parametrize(
    ("when_matched", "expected_a"),
    [
        ("replace", {"_id": "x", "k": "a", "v": 2}),
        ("merge", {"_id": "x", "k": "a", "v": 2, "w": 1}),
    ],
)
def test_on_a_unique_field_keeps_the_target_id(docs, db, when_matched, expected_a):
    docs.ensure_unique_index(db, "out", ["k"])
    docs.merge(db, "out", [{"_id": "x", "k": "a", "v": 1, "w": 1}])
    result = docs.merge(
        db, "out", [{"k": "a", "v": 2}, {"k": "b", "v": 3}], on=["k"], when_matched=when_matched
    )
    assert (result.inserted, result.updated, result.errors) == (1, 1, ())
    a, b = docs.find(db, "out", sort=[("k", 1)])
    assert a == expected_a
    assert isinstance(b["_id"], ObjectId) and {k: v for k, v in b.items() if k != "_id"} == {
        "k": "b",
        "v": 3,
    }


def test_compound_on_fields_match_an_index_in_any_order(docs, db):
    docs.ensure_unique_index(db, "out", ["k2", "k1"])
    docs.merge(
        db, "out", [{"_id": 1, "k1": "a", "k2": 1, "v": 0}, {"_id": 2, "k1": "a", "k2": 2, "v": 0}]
    )
    result = docs.merge(
        db, "out", [{"k1": "a", "k2": 2, "v": 9}], on=["k1", "k2"], when_matched="merge"
    )
    assert result.updated == 1
    assert [d["v"] for d in all_docs(docs, db)] == [0, 9]


def test_nested_on_field(docs, db):
    docs.ensure_unique_index(db, "out", ["u.id"])
    docs.merge(db, "out", [{"_id": 1, "u": {"id": 7}, "v": 0}])
    result = docs.merge(db, "out", [{"u": {"id": 7}, "v": 1}], on=["u.id"], when_matched="merge")
    assert result.updated == 1 and all_docs(docs, db) == [{"_id": 1, "u": {"id": 7}, "v": 1}]


@pytest.mark.parametrize("when_matched", ["replace", "merge"])
def test_changing_the_immutable_id_is_a_per_document_error(docs, db, when_matched):
    docs.ensure_unique_index(db, "out", ["k"])
    docs.merge(db, "out", [{"_id": "x", "k": "a", "v": 1}])
    bad = {"_id": "other", "k": "a", "v": 2}
    result = docs.merge(db, "out", [bad, {"k": "b", "v": 3}], on=["k"], when_matched=when_matched)
    assert result.inserted == 1 and result.updated == 0
    [(doc, message)] = result.errors
    assert doc == bad and "_id" in message and "immutable" in message.lower()
    assert docs.find(db, "out", {"k": "a"}) == [{"_id": "x", "k": "a", "v": 1}]


def test_duplicate_on_a_unique_index_is_a_per_document_error(docs, db):
    docs.ensure_unique_index(db, "out", ["k"])
    docs.merge(db, "out", [{"_id": 1, "k": "a"}])
    result = docs.merge(
        db, "out", [{"_id": 2, "k": "a"}, {"_id": 3, "k": "c"}, {"_id": 1, "k": "z"}]
    )
    assert (result.inserted, result.updated) == (1, 1)
    [(doc, message)] = result.errors
    assert doc == {"_id": 2, "k": "a"} and "e11000" in message.lower()
    assert all_docs(docs, db) == [{"_id": 1, "k": "z"}, {"_id": 3, "k": "c"}]


@pytest.mark.parametrize("bad", [{"v": 1}, {"k": None}, {"k": [1, 2]}])
def test_unusable_on_values_are_per_document_errors(docs, db, bad):
    docs.ensure_unique_index(db, "out", ["k"])
    result = docs.merge(db, "out", [{"k": "ok"}, bad], on=["k"])
    assert result.inserted == 1
    [(doc, message)] = result.errors
    assert doc == bad and "'on' field 'k'" in message


def test_errors_come_back_in_input_order(docs, db):
    docs.ensure_unique_index(db, "out", ["k"])
    docs.merge(db, "out", [{"_id": 1, "k": "taken"}])
    batch = [
        {"_id": 5, "k": "taken"},
        {"_id": 6, "ts": datetime(2024, 1, 1)},  # noqa: DTZ001 - naive on purpose
        {"_id": 7, "k": "taken"},
    ]
    result = docs.merge(db, "out", batch)
    assert [d["_id"] for d, _ in result.errors] == [5, 6, 7]
    assert "naive datetime" in result.errors[1][1]


def test_dates_are_truncated_and_aware(docs, db):
    docs.merge(db, "out", [{"_id": 1, "ts": T0 + timedelta(microseconds=1999)}])
    assert all_docs(docs, db)[0]["ts"] == T0 + timedelta(milliseconds=1)


def test_find_count_and_drop(docs, db):
    docs.merge(db, "out", [{"_id": i, "g": i % 2, "n": {"v": 10 - i}} for i in range(6)])
    assert [d["_id"] for d in docs.find(db, "out", {"g": 1}, sort=[("n.v", 1)])] == [5, 3, 1]
    page = docs.find(db, "out", sort=[("g", -1), ("_id", 1)], skip=1, limit=3)
    assert [d["_id"] for d in page] == [3, 5, 0]
    assert docs.find(db, "out", limit=0) == []
    assert docs.count(db, "out") == 6 and docs.count(db, "out", {"n.v": {"$gte": 8}}) == 3
    docs.merge(db, "other", [{"_id": 1}])
    docs.drop(db, "out")
    assert docs.count(db, "out") == 0 and docs.count(db, "other") == 1
    docs.drop(db, "never-existed")


def test_drop_removes_unique_indexes(docs, db):
    docs.ensure_unique_index(db, "out", ["k"])
    docs.drop(db, "out")
    with pytest.raises(MissingUniqueIndex):
        docs.merge(db, "out", [{"k": 1}], on=["k"])


def test_unique_index_creation_fails_on_existing_duplicates(docs, db):
    docs.merge(db, "out", [{"_id": 1, "k": "a"}, {"_id": 2, "k": "a"}])
    with pytest.raises(StoreError):
        docs.ensure_unique_index(db, "out", ["k"])
    with pytest.raises(MissingUniqueIndex):
        docs.merge(db, "out", [{"k": "a"}], on=["k"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"when_matched": "fail"},
        {"when_not_matched": "fail"},
        {"on": []},
        {"on": ["k", "k"]},
    ],
)
def test_invalid_merge_options(docs, db, kwargs):
    with pytest.raises(InvalidQuery):
        docs.merge(db, "out", [{"_id": 1}], **kwargs)


@pytest.mark.parametrize(
    ("bad_db", "bad_coll"), [("", "c"), ("a.b", "c"), ("d", ""), ("d", "x$y"), ("d", "system.x")]
)
def test_invalid_namespaces(docs, bad_db, bad_coll):
    with pytest.raises(InvalidQuery):
        docs.merge(bad_db, bad_coll, [{"_id": 1}])
