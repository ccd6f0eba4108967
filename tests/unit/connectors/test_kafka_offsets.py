"""Kafka `$source` bookkeeping without a JVM or a broker: offsets, limits, ranges, metadata."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline_stages._connectors.kafka_conf import client_config
from pipeline_stages._connectors.sources import kafka_offsets as K
from pipeline_stages._connectors.sources.kafka import KafkaStreamReader


def test_bounded_end_without_limit_is_latest_and_never_moves_back() -> None:
    start = {"t": {"0": 5, "1": 9}}
    latest = {"t": {"0": 8, "1": 7}}  # partition 1 below start: keep start
    assert K.bounded_end(start, latest, None) == {"t": {"0": 8, "1": 9}}
    assert K.bounded_end(start, latest, 100) == {"t": {"0": 8, "1": 9}}


def test_bounded_end_shares_the_limit_by_backlog_exactly() -> None:
    start = {"t": {"0": 0, "1": 0, "2": 0}}
    latest = {"t": {"0": 60, "1": 30, "2": 10}}
    end = K.bounded_end(start, latest, 10)
    assert end == {"t": {"0": 6, "1": 3, "2": 1}}
    assert sum(end["t"].values()) == 10


def test_a_small_limit_never_stalls_a_partition() -> None:
    start = {"t": {"0": 0, "1": 0}}
    latest = {"t": {"0": 1000, "1": 1}}
    end = K.bounded_end(start, latest, 2)
    assert end == {"t": {"0": 1, "1": 1}}
    # Repeating from each end reaches latest with at most 2 records per batch.
    batches = 0
    while end != latest:
        nxt = K.bounded_end(end, latest, 2)
        assert sum(nxt["t"][p] - end["t"][p] for p in nxt["t"]) <= 2
        end, batches = nxt, batches + 1
    assert batches == 500  # 999 records left on partition 0, 2 per batch


def test_fill_missing_starts_new_partitions_at_their_earliest_offset() -> None:
    start = {"t": {"0": 4}}
    latest = {"t": {"0": 9, "1": 12}, "u": {"0": 3}}
    earliest = {"t": {"0": 0, "1": 7}, "u": {"0": 0}}
    assert K.fill_missing(start, latest, earliest) == {"t": {"0": 4, "1": 7}, "u": {"0": 0}}


def test_ranges_are_in_topic_then_partition_order_and_skip_empty() -> None:
    start = {"b": {"0": 2, "10": 0, "2": 5}, "a": {"0": 0}}
    end = {"b": {"0": 4, "10": 1, "2": 5}, "a": {"0": 3}, "c": {"0": 2}}
    assert K.ranges(start, end, ["b", "a", "c"]) == [
        ("b", 0, 2, 4),
        ("b", 10, 0, 1),
        ("a", 0, 0, 3),
        ("c", 0, 0, 2),  # a new topic starts at its beginning
    ]


def test_part_ids_are_the_partition_for_the_first_topic_and_stable_otherwise() -> None:
    assert K.part_id(0, 7) == 7
    assert K.part_id(2, 7) == 2 * K.PART_STRIDE + 7
    with pytest.raises(ValueError):
        K.part_id(0, K.PART_STRIDE)


@pytest.mark.parametrize(
    ("key", "fmt", "decoded"),
    [
        (b"abc", "string", "abc"),
        (b'{"a": [1]}', "json", {"a": [1]}),
        ((-2).to_bytes(4, "big", signed=True), "int", -2),
        ((2**40).to_bytes(8, "big"), "long", {"$numberLong": str(2**40)}),
        (b"\x3f\xf8\x00\x00\x00\x00\x00\x00", "double", 1.5),
        (b"\x00\xff", "binData", {"$binary": {"base64": "AP8=", "subType": "00"}}),
        (None, "string", None),
    ],
)
def test_keys_decode_per_key_format(key: bytes | None, fmt: str, decoded: object) -> None:
    assert K.decode_key(key, fmt) == decoded


def test_meta_has_atlas_fields_and_flags_bad_keys_only_for_dlq() -> None:
    meta = json.loads(
        K.source_meta(
            topic="t",
            partition=2,
            offset=41,
            key=b"k1",
            headers=[("h", b"\x01"), ("n", None)],
            key_format="string",
            key_format_error="dlq",
        )
    )
    assert meta == {
        "type": "kafka",
        "topic": "t",
        "partition": 2,
        "offset": 41,
        "key": "k1",
        "headers": [
            {"k": "h", "v": {"$binary": {"base64": "AQ==", "subType": "00"}}},
            {"k": "n", "v": None},
        ],
    }
    bad = {
        "topic": "t",
        "partition": 0,
        "offset": 0,
        "key": b"\xff",
        "headers": None,
        "key_format": "string",
    }
    flagged = json.loads(K.source_meta(**bad, key_format_error="dlq"))
    assert flagged["key"] == K.binary(b"\xff") and "not a valid string" in flagged["keyError"]
    passed = json.loads(K.source_meta(**bad, key_format_error="passThrough"))
    assert passed["key"] == K.binary(b"\xff") and "keyError" not in passed


def test_reader_pickles_without_clients_and_reads_lower_cased_options() -> None:
    import pickle

    reader = KafkaStreamReader(
        {
            "clientconfigsecret": json.dumps({"bootstrap.servers": "h:1"}),
            "topics": json.dumps(["a", "b"]),
            "maxoffsetspertrigger": "7",
        }
    )
    reader._meta = object()  # stands for a live consumer
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._meta is None and copy.topics == ["a", "b"]
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 7
    parts = reader.partitions({"b": {"1": 3}}, {"b": {"1": 5}, "a": {"0": 2}})
    assert [(p.topic, p.partition, p.part, p.first, p.end) for p in parts] == [
        ("a", 0, 0, 0, 2),
        ("b", 1, K.PART_STRIDE + 1, 3, 5),
    ]


def test_latest_offset_applies_the_read_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = KafkaStreamReader(
        {"clientconfigsecret": json.dumps({"bootstrap.servers": "h:1"}), "topics": '["t"]'}
    )
    marks = {"latest": {"t": {"0": 10, "1": 4}}, "earliest": {"t": {"0": 0, "1": 2}}}
    monkeypatch.setattr(reader, "watermarks", lambda which: marks[which])
    assert reader.latestOffset({"t": {"0": 0}}, ReadAllAvailable()) == {"t": {"0": 10, "1": 4}}
    assert reader.latestOffset({"t": {"0": 0}}, ReadMaxRows(6)) == {"t": {"0": 5, "1": 3}}


def test_client_config_maps_connection_fields_and_passes_config_through() -> None:
    conf = client_config(
        {
            "bootstrapServers": "b1:9092,b2:9092",
            "security": {"protocol": "SASL_SSL"},
            "authentication": {"mechanism": "PLAIN", "username": "u", "password": "p"},
            "config": {"ssl.ca.location": "/ca.pem", "enable.ssl.certificate.verification": False},
        }
    )
    assert conf == {
        "bootstrap.servers": "b1:9092,b2:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "enable.ssl.certificate.verification": "false",
    }
    with pytest.raises(ValueError):
        client_config({})
