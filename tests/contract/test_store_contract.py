"""Contract: processors and connections behave the same in every store lane (see conftest)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from service.stores import (
    AlreadyExists,
    Conflict,
    ConnectionRecord,
    DlqQuery,
    NotFound,
    ProcessorRecord,
    ProcessorState,
    new_record_id,
)
from service.stores.errors import InvalidQuery

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
PIPELINE = '[{"$source": {"connectionName": "k", "topic": "t"}},\n {"$match": {"z": 10, "a": 10.0, "é": 1e3}}]'


def make_processor(name: str, *, at: datetime = T0, **changes: object) -> ProcessorRecord:
    record = ProcessorRecord.new(
        name=name,
        pipeline_json=PIPELINE,
        options={"dlq": {"connectionName": "local", "db": "d", "coll": "q"}},
        now=at,
    )
    return record.evolve(**changes) if changes else record


def test_create_then_get_round_trips_every_field(stores):
    record = make_processor(
        "p1",
        stats={"inputMessageCount": 7, "watermark": T0, "ratio": 1.0, "nested": {"k": [1, 2.5]}},
        error={"code": "boom", "message": "it broke"},
        state="FAILED",
        generation=3,
    )
    created = stores.processors.create(record)
    assert created.version == 1
    assert stores.processors.get("p1") == created
    assert stores.processors.get_by_id(record.id) == created
    assert stores.processors.get("missing") is None
    assert stores.processors.get_by_id(new_record_id()) is None


def test_pipeline_text_is_kept_byte_for_byte(stores):
    stores.processors.create(make_processor("p1"))
    stored = stores.processors.get("p1")
    assert stored.pipeline_json == PIPELINE  # key order, 10 vs 10.0, 1e3, whitespace, unicode


def test_stats_keep_int_and_float_apart(stores):
    stores.processors.create(make_processor("p1", stats={"a": 10, "b": 10.0}))
    stats = stores.processors.get("p1").stats
    assert type(stats["a"]) is int and type(stats["b"]) is float
    assert list(stats) == ["a", "b"]


def test_duplicate_name_is_rejected(stores):
    stores.processors.create(make_processor("p1"))
    with pytest.raises(AlreadyExists) as err:
        stores.processors.create(make_processor("p1"))
    assert err.value.code == "already_exists"


def test_duplicate_id_is_rejected(stores):
    first = stores.processors.create(make_processor("p1"))
    with pytest.raises(AlreadyExists):
        stores.processors.create(make_processor("p2", id=first.id))
    assert stores.processors.get("p2") is None


def test_list_pages_in_creation_order_with_total(stores):
    for i in range(5):
        stores.processors.create(make_processor(f"p{i}", at=T0 + timedelta(seconds=5 - i)))
    page, total = stores.processors.list(offset=1, limit=2)
    assert total == 5
    assert [r.name for r in page] == ["p3", "p2"]
    everything, _ = stores.processors.list(offset=0, limit=100)
    assert [r.name for r in everything] == ["p4", "p3", "p2", "p1", "p0"]
    assert stores.processors.list(offset=0, limit=0) == ([], 5)
    assert stores.processors.list(offset=10, limit=5) == ([], 5)


def test_list_rejects_negative_paging(stores):
    with pytest.raises(InvalidQuery):
        stores.processors.list(offset=-1, limit=5)


def test_same_creation_time_orders_by_id(stores):
    ids = sorted(new_record_id() for _ in range(3))
    for i, pid in enumerate(reversed(ids)):
        stores.processors.create(make_processor(f"p{i}", id=pid))
    page, _ = stores.processors.list(offset=0, limit=10)
    assert [r.id for r in page] == ids


def test_update_is_compare_and_set(stores):
    v1 = stores.processors.create(make_processor("p1"))
    v2 = stores.processors.update(v1.evolve(state=ProcessorState.STARTED, generation=2))
    assert v2.version == 2
    assert stores.processors.get("p1") == v2
    with pytest.raises(Conflict):
        stores.processors.update(v1.evolve(state=ProcessorState.STOPPED))
    assert stores.processors.get("p1").state is ProcessorState.STARTED


def test_update_of_deleted_processor_is_not_found(stores):
    v1 = stores.processors.create(make_processor("p1"))
    assert stores.processors.delete("p1") is True
    with pytest.raises(NotFound):
        stores.processors.update(v1)


def test_rename_moves_the_name_and_refuses_a_taken_one(stores):
    a = stores.processors.create(make_processor("a"))
    stores.processors.create(make_processor("b"))
    with pytest.raises(AlreadyExists):
        stores.processors.update(a.evolve(name="b"))
    renamed = stores.processors.update(a.evolve(name="c"))
    assert stores.processors.get("a") is None
    assert stores.processors.get("c") == renamed


def test_delete_reports_whether_it_existed(stores):
    stores.processors.create(make_processor("p1"))
    assert stores.processors.delete("p1") is True
    assert stores.processors.delete("p1") is False
    assert stores.processors.get("p1") is None


def test_datetimes_are_truncated_to_ms_and_returned_in_utc(stores):
    plus2 = timezone(timedelta(hours=2))
    at = datetime(2024, 5, 1, 14, 0, 0, 123456, tzinfo=plus2)
    stores.processors.create(make_processor("p1", at=at, stats={"wm": at}))
    stored = stores.processors.get("p1")
    expected = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
    assert stored.created_at == expected and stored.created_at.utcoffset() == timedelta(0)
    assert stored.stats["wm"] == expected


def test_naive_datetimes_are_rejected():
    with pytest.raises(ValidationError):
        make_processor("p1", at=datetime(2024, 1, 1))  # noqa: DTZ001 - the point of the test
    with pytest.raises(ValidationError, match="naive datetime"):
        make_processor("p1", stats={"wm": datetime(2024, 1, 1)})  # noqa: DTZ001


def test_update_revalidates_records_built_with_model_copy(stores):
    v1 = stores.processors.create(make_processor("p1"))
    sneaky = v1.model_copy(update={"last_state_change": datetime(2024, 1, 1)})  # noqa: DTZ001
    with pytest.raises(ValidationError):
        stores.processors.update(sneaky)
    assert stores.processors.get("p1") == v1


def test_processor_ids_must_look_like_object_ids():
    with pytest.raises(ValidationError):
        make_processor("p1", id="not-hex")


def test_pipeline_text_must_be_json():
    with pytest.raises(ValidationError):
        make_processor("p1", pipeline_json="[{")


KAFKA_CONFIG = {
    "bootstrapServers": "b1:9092",
    "authentication": {"mechanism": "PLAIN", "username": "u", "password": "pw", "extra": "x"},
    "security": {"protocol": "SASL_SSL"},
    "config": {"auto.offset.reset": "earliest", "sasl.password": "pw2", "ssl.key.password": "pw3"},
}


def make_connection(name: str, **config: object) -> ConnectionRecord:
    return ConnectionRecord(name=name, type="Kafka", config=config or KAFKA_CONFIG, created_at=T0)


def test_connection_round_trip_keeps_secrets_in_storage(stores):
    stores.connections.create(make_connection("kafka1"))
    stored = stores.connections.get("kafka1")
    assert stored == make_connection("kafka1")
    assert stored.config["config"]["sasl.password"] == "pw2"


def test_connection_public_strips_secrets_after_a_round_trip(stores):
    stores.connections.create(make_connection("kafka1"))
    public = stores.connections.get("kafka1").public()
    assert public.config == {
        "bootstrapServers": "b1:9092",
        "authentication": {"mechanism": "PLAIN", "username": "u"},
        "security": {"protocol": "SASL_SSL"},
        "config": {"auto.offset.reset": "earliest"},
    }


def test_cluster_uri_password_is_stripped(stores):
    uri = "mongodb+srv://app:s3cr%40t@cluster0.example.net/db?retryWrites=true"
    stores.connections.create(
        ConnectionRecord(
            name="atlas", type="Cluster", config={"connectionString": uri}, created_at=T0
        )
    )
    public = stores.connections.get("atlas").public()
    assert (
        public.config["connectionString"]
        == "mongodb+srv://app@cluster0.example.net/db?retryWrites=true"
    )


def test_duplicate_connection_is_rejected(stores):
    stores.connections.create(make_connection("c1"))
    with pytest.raises(AlreadyExists):
        stores.connections.create(make_connection("c1", bootstrapServers="other:9092"))
    assert stores.connections.get("c1").config["bootstrapServers"] == "b1:9092"


def test_connections_list_by_name_and_delete(stores):
    for name in ("c", "a", "b"):
        stores.connections.create(make_connection(name))
    page, total = stores.connections.list(offset=1, limit=5)
    assert total == 3 and [c.name for c in page] == ["b", "c"]
    assert stores.connections.delete("b") is True
    assert stores.connections.delete("b") is False
    assert [c.name for c in stores.connections.list()[0]] == ["a", "c"]
    assert stores.connections.get("b") is None


@pytest.mark.parametrize("name", ["", "../etc", "a/b", "a b", "x" * 65])
def test_connection_names_are_validated(name):
    with pytest.raises(ValidationError):
        make_connection(name)


def test_everything_survives_a_restart(harness):
    stores = harness.stores
    created = stores.processors.create(make_processor("p1"))
    stores.connections.create(make_connection("c1"))
    dlq_doc = {
        "_id": "d1",
        "errInfo": {"reason": "r"},
        "operatorName": "Op",
        "dlqTime": T0,
        "doc": {"a": 1},
    }
    stores.dlq(harness.db, "dlq").upsert_many("p1", [dlq_doc])
    stores.documents.merge(harness.db, "out", [{"_id": 1, "v": 1.5}])

    reopened = harness.reopen()
    assert reopened.processors.get("p1") == created
    assert reopened.connections.get("c1") == make_connection("c1")
    docs, total = reopened.dlq(harness.db, "dlq").find(DlqQuery(processor="p1"))
    assert total == 1 and docs[0] == {**dlq_doc, "processorName": "p1"}
    assert reopened.documents.find(harness.db, "out") == [{"_id": 1, "v": 1.5}]
    # The CAS version also survived: the old record is now stale only after an update.
    updated = reopened.processors.update(created.evolve(state="STARTED"))
    assert updated.version == 2
