"""`$source` spec: Kafka, change stream, documents and File forms."""

from __future__ import annotations

import pytest

from pipeline_stages.source import KEY, OPERATOR_NAME, SourceSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$source", "SourceOperator")


def test_kafka_defaults(parse_body) -> None:
    spec = parse_body(KEY, {"connectionName": "kafka", "topic": "t"})
    assert isinstance(spec, SourceSpec)
    assert (spec.connection_name, spec.topic) == ("kafka", ("t",))
    assert (spec.ts_field_name, spec.stream_meta_field_name, spec.time_field) == (
        "_ts",
        "_stream_meta",
        None,
    )
    assert spec.partition_idle_timeout is None
    config = spec.config
    assert (config.auto_offset_reset, config.group_id, config.enable_auto_commit) == (
        "latest",
        None,
        None,
    )
    assert (config.key_format, config.key_format_error, config.batch_size) == ("binData", "dlq", 1)
    assert config.model_fields_set == set()


def test_kafka_all_fields(parse_body) -> None:
    body = {
        "connectionName": "kafka",
        "topic": ["a", "b"],
        "timeField": {"$dateFromString": {"dateString": "$timestamp"}},
        "tsFieldName": "ingestionTime",
        "partitionIdleTimeout": {"size": 10, "unit": "second"},
        "config": {
            "auto_offset_reset": "earliest",
            "group_id": "g",
            "enable_auto_commit": False,
            "keyFormat": "string",
            "keyFormatError": "passThrough",
        },
    }
    spec = parse_body(KEY, body)
    assert spec.topic == ("a", "b")
    assert spec.ts_field_name == "ingestionTime"
    assert spec.partition_idle_timeout.ms == 10_000
    assert (
        spec.config.auto_offset_reset,
        spec.config.group_id,
        spec.config.enable_auto_commit,
    ) == ("earliest", "g", False)
    assert (spec.config.key_format, spec.config.key_format_error) == ("string", "passThrough")
    assert spec.config.model_fields_set == {
        "auto_offset_reset",
        "group_id",
        "enable_auto_commit",
        "key_format",
        "key_format_error",
    }


def test_change_stream(parse_body) -> None:
    body = {
        "connectionName": "atlas",
        "db": "shop",
        "coll": ["orders", "returns"],
        "timeField": {"$toDate": "$fullDocument.ts"},
        "readPreference": "secondaryPreferred",
        "config": {
            "fullDocument": "updateLookup",
            "fullDocumentBeforeChange": "whenAvailable",
            "fullDocumentOnly": True,
            "startAtOperationTime": {"$date": "2025-01-01T00:00:00Z"},
            "pipeline": [{"$match": {"operationType": "insert"}}],
            "maxAwaitTimeMS": 1000.0,
        },
    }
    spec = parse_body(KEY, body)
    assert (spec.db, spec.coll, spec.read_preference) == (
        "shop",
        ("orders", "returns"),
        "secondaryPreferred",
    )
    config = spec.config
    assert (
        config.full_document,
        config.full_document_before_change,
        config.full_document_only,
    ) == ("updateLookup", "whenAvailable", True)
    assert config.pipeline == [{"$match": {"operationType": "insert"}}]
    assert config.max_await_time_ms == 1000


def test_change_stream_defaults(parse_body) -> None:
    config = parse_body(KEY, {"connectionName": "atlas", "db": "shop"}).config
    assert (
        config.full_document,
        config.full_document_before_change,
        config.full_document_only,
    ) == ("default", "off", False)


def test_documents_form(parse_body) -> None:
    docs = [{"a": 1, "ts": {"$date": "2024-01-01T00:00:00Z"}}, {"a": 2.0}]
    spec = parse_body(KEY, {"documents": docs, "timeField": "$ts", "config": {"batchSize": 2}})
    assert spec.documents == docs
    assert type(spec.documents[1]["a"]) is float
    assert (spec.connection_name, spec.time_field, spec.config.batch_size) == (None, "$ts", 2)


def test_documents_expression_and_file_path(parse_body) -> None:
    assert parse_body(KEY, {"documents": {"$range": [0, 3]}}).documents == {"$range": [0, 3]}
    spec = parse_body(
        KEY, {"connectionName": "files", "path": "in/*.jsonl", "streamMetaFieldName": ""}
    )
    assert (spec.path, spec.stream_meta_projected) == ("in/*.jsonl", False)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("missing", "/connectionName")]),
        ({"topic": "t"}, [("missing", "/connectionName")]),
        ({"documents": [], "connectionName": "k"}, [("invalid_combination", "/connectionName")]),
        ({"documents": [], "topic": "t"}, [("invalid_combination", "/topic")]),
        ({"documents": [{"a": 1}, 5]}, [("dict_type", "/documents/1")]),
        ({"documents": "abc"}, [("list_type", "/documents")]),
        ({"connectionName": "k", "topic": 5}, [("string_type", "/topic")]),
        ({"connectionName": "k", "topic": ["a", ""]}, [("string_too_short", "/topic/1")]),
        ({"connectionName": "k", "topic": []}, [("too_short", "/topic")]),
        ({"connectionName": "k", "topic": "t", "db": "d"}, [("invalid_combination", "/topic")]),
        ({"connectionName": "a", "coll": "c"}, [("missing", "/db")]),
        ({"connectionName": "k", "timeField": "ts"}, [("invalid_value", "/timeField")]),
        (
            {"connectionName": "k", "timeField": {"$toLong": "$ts"}},
            [("invalid_value", "/timeField")],
        ),
        (
            {"connectionName": "k", "timeField": {"$dateFromString": "$ts"}},
            [("invalid_value", "/timeField")],
        ),
        ({"connectionName": "k", "tsFieldName": "a.b"}, [("invalid_value", "/tsFieldName")]),
        ({"connectionName": "k", "tsFieldName": ""}, [("invalid_value", "/tsFieldName")]),
        (
            {"connectionName": "k", "streamMetaFieldName": "$m"},
            [("invalid_value", "/streamMetaFieldName")],
        ),
        (
            {"connectionName": "k", "partitionIdleTimeout": 5},
            [("model_type", "/partitionIdleTimeout")],
        ),
        (
            {"connectionName": "k", "config": {"auto_offset_reset": "middle"}},
            [("literal_error", "/config/auto_offset_reset")],
        ),
        (
            {"connectionName": "k", "config": {"keyFormat": "avro"}},
            [("literal_error", "/config/keyFormat")],
        ),
        (
            {"connectionName": "k", "config": {"enable_auto_commit": "yes"}},
            [("bool_type", "/config/enable_auto_commit")],
        ),
        (
            {"connectionName": "k", "config": {"batchSize": 0}},
            [("greater_than_equal", "/config/batchSize")],
        ),
        (
            {"connectionName": "k", "config": {"key_format": "json"}},
            [("extra_forbidden", "/config/key_format")],
        ),
        (
            {
                "connectionName": "a",
                "db": "d",
                "config": {"startAfter": {"_data": "x"}, "startAtOperationTime": 1},
            },
            [("invalid_combination", "/config/startAtOperationTime")],
        ),
        (
            {"connectionName": "a", "db": "d", "initialSync": {"enable": True}},
            [("unsupported_option", "/initialSync")],
        ),
        (
            {"connectionName": "k", "schemaRegistry": {"connectionName": "sr"}},
            [("unsupported_option", "/schemaRegistry")],
        ),
        (
            {"connectionName": "k", "tsFieldOverride": "t"},
            [("unsupported_option", "/tsFieldOverride")],
        ),
        (
            {"connectionName": "k", "connection_name": "k"},
            [("extra_forbidden", "/connection_name")],
        ),
        ({"connectionName": "k", "topics": "t"}, [("extra_forbidden", "/topics")]),
        (
            {"initialSync": {}, "coll": "c", "tsFieldName": "a.b"},
            [
                ("unsupported_option", "/initialSync"),
                ("missing", "/connectionName"),
                ("missing", "/db"),
                ("invalid_value", "/tsFieldName"),
            ],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_messages(body_messages) -> None:
    assert body_messages(
        KEY, {"connectionName": "a", "db": "d", "initialSync": {"enable": True}}
    ) == ["'initialSync' is not supported: initial collection scans are not implemented in Sluice"]
    assert body_messages(KEY, {"documents": [], "connectionName": "k"}) == [
        "documents cannot be combined with connectionName"
    ]
