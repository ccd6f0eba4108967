"""`$emit` spec: Kafka, time-series and File forms."""

from __future__ import annotations

import pytest

from pipeline_stages.emit import KEY, OPERATOR_NAME, EmitSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$emit", "EmitOperator")


def test_kafka_defaults(parse_body) -> None:
    spec = parse_body(KEY, {"connectionName": "k", "topic": "out"})
    assert isinstance(spec, EmitSpec)
    assert (spec.topic, spec.db, spec.coll, spec.path, spec.timeseries) == (
        "out",
        None,
        None,
        None,
        None,
    )
    config = spec.config
    assert (config.acks, config.compression_type, config.date_format, config.output_format) == (
        "all",
        "none",
        "default",
        "relaxedJson",
    )
    assert (config.key, config.key_format, config.headers, config.tombstone_when) == (
        None,
        None,
        None,
        None,
    )


def test_kafka_config(parse_body) -> None:
    body = {
        "connectionName": "k",
        "topic": "$region",
        "config": {
            "acks": 1.0,
            "compression_type": "zstd",
            "dateFormat": "ISO8601",
            "headers": {"h": "$x"},
            "key": "$id",
            "keyFormat": "string",
            "outputFormat": "canonicalJson",
            "tombstoneWhen": {"$eq": ["$op", "delete"]},
        },
    }
    config = parse_body(KEY, body).config
    assert config.acks == 1 and type(config.acks) is int
    assert (config.key_format, config.output_format, config.date_format) == (
        "string",
        "canonicalJson",
        "ISO8601",
    )


def test_time_series_and_file(parse_body) -> None:
    spec = parse_body(
        KEY,
        {
            "connectionName": "a",
            "db": "d",
            "coll": {"$concat": ["c", "$x"]},
            "timeseries": {"timeField": "ts", "metaField": "m", "granularity": "seconds"},
        },
    )
    assert (
        spec.timeseries.time_field,
        spec.timeseries.meta_field,
        spec.timeseries.granularity,
    ) == ("ts", "m", "seconds")
    assert (
        parse_body(KEY, {"connectionName": "files", "path": "out/result.jsonl"}).path
        == "out/result.jsonl"
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"topic": "t"}, [("missing", "/connectionName")]),
        ({"connectionName": "k"}, [("missing", "")]),
        ({"connectionName": "k", "topic": "t", "path": "p"}, [("invalid_combination", "/path")]),
        (
            {"connectionName": "k", "topic": "t", "db": "d", "coll": "c"},
            [("invalid_combination", "/db")],
        ),
        ({"connectionName": "a", "db": "d"}, [("missing", "/coll")]),
        (
            {"connectionName": "k", "path": "p", "timeseries": {"timeField": "t"}},
            [("invalid_combination", "/timeseries")],
        ),
        (
            {"connectionName": "a", "db": "d", "coll": "c", "timeseries": {}},
            [("missing", "/timeseries/timeField")],
        ),
        ({"connectionName": "k", "topic": ""}, [("invalid_value", "/topic")]),
        ({"connectionName": "k", "topic": 5}, [("invalid_value", "/topic")]),
        (
            {"connectionName": "k", "topic": "t", "config": {"acks": 2}},
            [("literal_error", "/config/acks")],
        ),
        (
            {"connectionName": "k", "topic": "t", "config": {"acks": True}},
            [("literal_error", "/config/acks")],
        ),
        (
            {"connectionName": "k", "topic": "t", "config": {"key": "$id"}},
            [("missing", "/config/keyFormat")],
        ),
        (
            {"connectionName": "k", "topic": "t", "config": {"compression_type": "brotli"}},
            [("literal_error", "/config/compression_type")],
        ),
        (
            {"connectionName": "k", "topic": "t", "config": {"writeOptions": {}}},
            [("extra_forbidden", "/config/writeOptions")],
        ),
        ({"connectionName": "s3", "bucket": "b", "path": "p"}, [("unsupported_option", "/bucket")]),
        (
            {"connectionName": "kin", "stream": "s", "region": "r"},
            [("unsupported_option", "/stream"), ("unsupported_option", "/region"), ("missing", "")],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
