"""Contract: DLQ stores behave the same in every lane (see conftest for what each lane proves)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from bson import ObjectId
from pydantic import ValidationError

from service.stores import DlqQuery, InvalidDocument, InvalidQuery

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
LATE = "Input document arrived late."
ADD_FIELDS = (
    "Failed to process input document in AddFieldsOperator with error: can't $divide by zero"
)


def dlq_doc(
    i: int, *, reason: str = LATE, op: str = "GroupOperator", at: datetime | None = None, **doc
):
    """An Atlas-shaped DLQ document (atlas-semantics.md §6.2)."""
    return {
        "_id": f"id-{i:03d}",
        "_stream_meta": {"source": {"type": "kafka", "topic": "t", "partition": 0, "offset": i}},
        "errInfo": {"reason": reason},
        "operatorName": op,
        "doc": {"n": i, **doc},
        "processorName": "p1",
        "dlqTime": at or T0 + timedelta(seconds=i),
    }


@pytest.fixture
def dlq(harness):
    return harness.stores.dlq(harness.db, "dlq")


def ids(docs):
    return [d["_id"] for d in docs]


def test_upsert_is_idempotent_on_id(dlq):
    batch = [dlq_doc(i) for i in range(3)]
    assert dlq.upsert_many("p1", batch) == 3
    assert dlq.upsert_many("p1", batch) == 0  # a replayed micro-batch
    assert dlq.count(DlqQuery(processor="p1")) == 3


def test_first_write_wins_for_a_repeated_id(dlq):
    dlq.upsert_many("p1", [dlq_doc(1)])
    assert (
        dlq.upsert_many("p1", [dlq_doc(1, reason="other", at=T0 + timedelta(days=1)), dlq_doc(2)])
        == 1
    )
    docs, _ = dlq.find(DlqQuery(processor="p1"))
    assert docs[0] == dlq_doc(1)


def test_repeated_id_inside_one_batch_is_stored_once(dlq):
    assert dlq.upsert_many("p1", [dlq_doc(1), dlq_doc(1)]) == 1
    assert dlq.count(DlqQuery(processor="p1")) == 1


def test_documents_round_trip_in_atlas_shape(dlq):
    oid = ObjectId()
    doc = dlq_doc(1, ts=T0, oid=oid, raw=b"\x00\x01", ints=[1, 2.0], deep={"z": None, "a": True})
    doc["missedWindowStartTimes"] = [T0, T0 + timedelta(seconds=10)]
    dlq.upsert_many("p1", [doc])
    [back], total = dlq.find(DlqQuery(processor="p1"))
    assert total == 1 and back == doc
    assert list(back) == list(doc)  # field order kept
    assert type(back["doc"]["ints"][0]) is int and type(back["doc"]["ints"][1]) is float


def test_missing_processor_name_is_filled_in(dlq):
    doc = dlq_doc(1)
    del doc["processorName"]
    dlq.upsert_many("p1", [doc])
    assert dlq.find(DlqQuery(processor="p1"))[0][0]["processorName"] == "p1"


@pytest.mark.parametrize(
    ("field", "value", "path"),
    [
        ("_id", None, "/1/_id"),
        ("_id", 5, "/1/_id"),
        ("errInfo", {}, "/1/errInfo/reason"),
        ("operatorName", None, "/1/operatorName"),
        ("dlqTime", "2024-01-01", "/1/dlqTime"),
        ("processorName", "someone-else", "/1/processorName"),
    ],
)
def test_invalid_documents_are_rejected_with_a_path(dlq, field, value, path):
    bad = dlq_doc(2)
    bad[field] = value
    with pytest.raises(InvalidDocument) as err:
        dlq.upsert_many("p1", [dlq_doc(1), bad])
    assert err.value.path == path
    assert dlq.count(DlqQuery(processor="p1")) == 0  # the batch is all or nothing


def test_naive_datetimes_are_rejected_anywhere_in_the_document(dlq):
    with pytest.raises(InvalidDocument) as err:
        dlq.upsert_many("p1", [dlq_doc(0, at=datetime(2024, 1, 1))])  # noqa: DTZ001
    assert err.value.code == "naive_datetime" and err.value.path == "/0/dlqTime"
    with pytest.raises(InvalidDocument) as err:
        dlq.upsert_many("p1", [dlq_doc(0, ts=datetime(2024, 1, 1))])  # noqa: DTZ001
    assert err.value.path == "/0/doc/ts"


def test_dates_are_truncated_to_milliseconds(dlq):
    precise = T0 + timedelta(microseconds=987654)
    dlq.upsert_many("p1", [dlq_doc(1, at=precise, ts=precise)])
    [back], _ = dlq.find(DlqQuery(processor="p1"))
    truncated = T0 + timedelta(microseconds=987000)
    assert back["dlqTime"] == truncated and back["doc"]["ts"] == truncated


def seed(dlq):
    docs = [
        dlq_doc(0, reason=LATE, op="GroupOperator", user={"id": 1, "country": "FR"}),
        dlq_doc(1, reason=ADD_FIELDS, op="AddFieldsOperator", user={"id": 2, "country": "DE"}),
        dlq_doc(2, reason=LATE, op="GroupOperator", user={"id": 3, "country": "fr"}),
        dlq_doc(3, reason=ADD_FIELDS, op="AddFieldsOperator", user={"id": 4, "country": "US"}),
        dlq_doc(4, reason=LATE, op="ValidateOperator", user={"id": 5, "country": "FR"}),
    ]
    dlq.upsert_many("p1", docs)
    other = dlq_doc(9, user={"id": 1})
    other["processorName"] = "p2"
    dlq.upsert_many("p2", [other])


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({}, [0, 1, 2, 3, 4]),
        ({"reason": LATE}, [0, 2, 4]),
        ({"reason": "arrived late"}, []),  # reason is an exact match, not a substring
        ({"operator_name": "AddFieldsOperator"}, [1, 3]),
        ({"dlq_time_from": T0 + timedelta(seconds=1)}, [1, 2, 3, 4]),  # inclusive
        ({"dlq_time_to": T0 + timedelta(seconds=3)}, [0, 1, 2]),  # exclusive
        ({"reason": LATE, "dlq_time_from": T0 + timedelta(seconds=1)}, [2, 4]),
        ({"filter": {"doc.user.country": "FR"}}, [0, 4]),
        ({"filter": {"doc.user.id": {"$in": [2, 5, 99]}}}, [1, 4]),
        ({"filter": {"doc.user.id": {"$gt": 2, "$lte": 4}}}, [2, 3]),
        ({"filter": {"doc.user.country": {"$regex": "^fr$", "$options": "i"}}}, [0, 2, 4]),
        ({"filter": {"doc.user.country": re.compile("^[DU]")}}, [1, 3]),
        ({"filter": {"errInfo.reason": {"$regex": "divide"}}}, [1, 3]),
        ({"filter": {"$or": [{"doc.n": 0}, {"operatorName": "ValidateOperator"}]}}, [0, 4]),
        ({"filter": {"dlqTime": {"$gte": T0 + timedelta(seconds=3)}}}, [3, 4]),
        ({"filter": {"doc.user.missing": {"$exists": True}}}, []),
        ({"filter": {"doc.user.id": 1}, "operator_name": "GroupOperator"}, [0]),
        ({"filter": {"$expr": {"$gt": ["$doc.n", 2]}}}, [3, 4]),
        ({"filter": {"doc.user": {"id": 2, "country": "DE"}}}, [1]),  # whole sub-document
    ],
    ids=lambda v: repr(v)[:60] if isinstance(v, dict) else None,
)
def test_find_filters(dlq, query, expected):
    seed(dlq)
    docs, total = dlq.find(DlqQuery(processor="p1", **query))
    assert ids(docs) == [f"id-{i:03d}" for i in expected]
    assert total == len(expected) == dlq.count(DlqQuery(processor="p1", **query))


def test_subdocument_equality_is_field_order_sensitive(harness, dlq, request):
    if harness.lane != "real":
        # mongomock's matcher compares sub-documents as Python dicts (order-blind); the SQLite
        # store uses that matcher, so both lanes share the gap. A server is order-sensitive.
        reason = "known gap: mongomock matches sub-documents regardless of field order"
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    seed(dlq)
    docs, _ = dlq.find(DlqQuery(processor="p1", filter={"doc.user": {"country": "DE", "id": 2}}))
    assert docs == []


def test_processors_sharing_a_collection_are_kept_apart(dlq):
    seed(dlq)
    docs, total = dlq.find(DlqQuery(processor="p2"))
    assert total == 1 and ids(docs) == ["id-009"]


def test_collections_are_separate(harness):
    a = harness.stores.dlq(harness.db, "dlq_a")
    b = harness.stores.dlq(harness.db, "dlq_b")
    assert a.upsert_many("p1", [dlq_doc(1)]) == 1
    assert b.upsert_many("p1", [dlq_doc(1)]) == 1  # the same _id, another collection
    assert a.purge(DlqQuery(processor="p1")) == 1
    assert b.count(DlqQuery(processor="p1")) == 1


def test_order_is_dlq_time_then_id_and_paging_is_stable(dlq):
    # Ten documents sharing three timestamps, inserted in a scrambled order.
    order = [7, 2, 9, 0, 5, 3, 8, 1, 6, 4]
    dlq.upsert_many("p1", [dlq_doc(i, at=T0 + timedelta(seconds=i % 3)) for i in order])
    expected = sorted((i % 3, f"id-{i:03d}") for i in range(10))
    full, total = dlq.find(DlqQuery(processor="p1"))
    assert [d["_id"] for d in full] == [e[1] for e in expected] and total == 10
    pages = [dlq.find(DlqQuery(processor="p1", skip=s, limit=3)) for s in range(0, 10, 3)]
    assert [d for page, _ in pages for d in page] == full
    assert all(t == 10 for _, t in pages)
    newest, _ = dlq.find(DlqQuery(processor="p1", newest_first=True, limit=4))
    assert newest == list(reversed(full))[:4]


def test_paging_with_a_python_or_server_filter(dlq):
    seed(dlq)
    query = {"processor": "p1", "filter": {"doc.user.country": {"$in": ["FR", "US"]}}}
    page, total = dlq.find(DlqQuery(**query, skip=1, limit=1))
    assert total == 3 and ids(page) == ["id-003"]
    assert dlq.find(DlqQuery(**query, limit=0)) == ([], 3)


def test_purge_counts_what_it_deleted(dlq):
    seed(dlq)
    assert dlq.purge(DlqQuery(processor="p1", reason=LATE, filter={"doc.user.country": "FR"})) == 2
    assert dlq.purge(DlqQuery(processor="p1", reason=LATE, filter={"doc.user.country": "FR"})) == 0
    assert dlq.purge(DlqQuery(processor="p1", operator_name="AddFieldsOperator")) == 2
    assert ids(dlq.find(DlqQuery(processor="p1"))[0]) == ["id-002"]
    assert dlq.count(DlqQuery(processor="p2")) == 1  # another processor is untouched


def test_purge_refuses_skip_and_limit(dlq):
    seed(dlq)
    with pytest.raises(InvalidQuery):
        dlq.purge(DlqQuery(processor="p1", limit=1))
    with pytest.raises(InvalidQuery):
        dlq.purge(DlqQuery(processor="p1", skip=1))
    assert dlq.count(DlqQuery(processor="p1")) == 5


@pytest.mark.parametrize("bad", [{"doc.n": {"$nosuch": 1}}, {"doc.user.country": {"$regex": "("}}])
def test_filters_the_matcher_rejects_are_invalid_queries(dlq, bad):
    seed(dlq)
    with pytest.raises(InvalidQuery):
        dlq.find(DlqQuery(processor="p1", filter=bad))


@pytest.mark.parametrize(
    "bad",
    [
        {"$where": "this.doc.n > 1"},
        {"$expr": {"$function": {"body": "function() {return true}", "args": [], "lang": "js"}}},
        {"doc.ts": {"$lt": datetime(2024, 1, 1)}},  # noqa: DTZ001 - naive on purpose
    ],
)
def test_queries_reject_javascript_and_naive_dates(bad):
    with pytest.raises(ValidationError):
        DlqQuery(processor="p1", filter=bad)


def test_query_time_bounds_must_be_aware():
    with pytest.raises(ValidationError):
        DlqQuery(processor="p1", dlq_time_from=datetime(2024, 1, 1))  # noqa: DTZ001


# --------------------------------------------------------------------------- reason substring


@pytest.mark.parametrize(
    ("part", "expected"),
    [("ARRIVED late", [0, 2, 4]), ("divide", [1, 3]), ("$divide BY", [1, 3]), ("nope", [])],
)
def test_reason_contains_ignores_case(dlq, part, expected):
    seed(dlq)
    docs, total = dlq.find(DlqQuery(processor="p1", reason_contains=part))
    assert ids(docs) == [f"id-{i:03d}" for i in expected] and total == len(expected)


# --------------------------------------------------------------------------- replay marks

P2 = "processor:p2"
AT = T0 + timedelta(hours=1, microseconds=1500)


def marked(dlq, **query):
    docs, _ = dlq.find(DlqQuery(processor="p1", **query))
    return [int(d["_id"][3:]) for d in docs]


def test_marks_are_set_once_per_target(dlq):
    seed(dlq)
    assert dlq.mark_replayed("p1", ["id-000", "id-001"], target=P2, at=AT) == 2
    assert dlq.mark_replayed("p1", ["id-000", "id-001"], target=P2, at=AT) == 0  # a retry
    assert dlq.mark_replayed("p1", ["id-001", "id-002"], target=P2, at=AT) == 1
    assert dlq.mark_replayed("p1", ["id-000"], target="connection:in2", at=AT) == 1
    [first], _ = dlq.find(DlqQuery(processor="p1", limit=1))
    assert first["replayedTo"] == [P2, "connection:in2"]
    assert first["replayedAt"] == T0 + timedelta(hours=1, microseconds=1000)  # BSON precision
    unmarked = dlq_doc(0, user={"id": 1, "country": "FR"})
    assert {k: v for k, v in first.items() if not k.startswith("replayed")} == unmarked


def test_replay_filters(dlq):
    seed(dlq)
    dlq.mark_replayed("p1", ["id-000", "id-002"], target=P2, at=AT)
    dlq.mark_replayed("p1", ["id-003"], target="connection:in2", at=AT)
    assert marked(dlq, replayed=True) == [0, 2, 3]
    assert marked(dlq, replayed=False) == [1, 4]
    assert marked(dlq, replayed_to=P2) == [0, 2]
    assert marked(dlq, not_replayed_to=P2) == [1, 3, 4]
    assert marked(dlq, not_replayed_to=P2, reason=LATE) == [4]
    assert marked(dlq, replayed_to=P2, filter={"doc.n": {"$gt": 0}}) == [2]
    assert dlq.count(DlqQuery(processor="p1", replayed_to="connection:in2")) == 1


def test_marks_stay_with_their_processor(dlq):
    seed(dlq)
    assert dlq.mark_replayed("p1", ["id-009"], target=P2, at=AT) == 0  # p2's record
    assert dlq.count(DlqQuery(processor="p2", replayed=True)) == 0


def test_marks_survive_a_restart(harness):
    dlq = harness.stores.dlq(harness.db, "dlq")
    seed(dlq)
    dlq.mark_replayed("p1", ["id-001"], target=P2, at=AT)
    reopened = harness.reopen().dlq(harness.db, "dlq")
    assert marked(reopened, replayed_to=P2) == [1]
    assert reopened.mark_replayed("p1", ["id-001"], target=P2, at=AT) == 0
