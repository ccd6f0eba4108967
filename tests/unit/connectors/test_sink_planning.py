"""Sink planning, per-document target resolution, deterministic ids (no Spark, no store)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline_stages import parse_stage
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sinks import planning
from pipeline_stages._connectors.sinks.ids import effective_keys, sink_dlq_record, with_id
from pipeline_stages._connectors.sinks.plans import (
    TARGET_META,
    CollectionEmitPlan,
    FileEmitPlan,
    MergePlan,
    Name,
    TargetError,
    computed_names,
    resolve_name,
)
from pipeline_stages._stream.batch import Output, sink_target
from pipeline_stages._stream.context import BUILTIN_CONNECTIONS, ConnectionInfo

CONNECTIONS = {
    "atlas": ConnectionInfo("atlas", "Cluster", {"uri": "mongodb://h/"}),
    "files": ConnectionInfo("files", "File", {"directory": "/data"}),
    "kafka": ConnectionInfo("kafka", "Kafka", {"bootstrapServers": "k:9092"}),
    "solar": ConnectionInfo("solar", "Sample"),
}


def connection_of(name: str) -> ConnectionInfo | None:
    return CONNECTIONS.get(name) or BUILTIN_CONNECTIONS.get(name)


def plan(stage: dict[str, Any]) -> tuple[Any, list[tuple[str, str]]]:
    parsed = parse_stage(stage, path="/pipeline/2")
    problems = ProblemCollector()
    result = planning.plan_sink(parsed, connection_of=connection_of, problems=problems)
    return result, [(p.code, p.path) for p in problems.problems]


def merge(**body: Any) -> dict[str, Any]:
    into = {"connectionName": "local", "db": "app", "coll": "out"}
    return {"$merge": {"into": {**into, **body.pop("into", {})}, **body}}


# ----------------------------------------------------------------------------- $merge


def test_merge_into_local_with_defaults() -> None:
    result, problems = plan(merge())
    assert problems == []
    assert result == MergePlan(
        connection="local",
        connection_type="Local",
        db=Name("app", pointer=("into", "db")),
        coll=Name("out", pointer=("into", "coll")),
    )
    assert (result.on, result.when_matched, result.when_not_matched) == (
        ("_id",),
        "merge",
        "insert",
    )
    assert result.assigns_ids and computed_names(result) == {}


def test_merge_into_a_cluster_with_on_fields_modes_and_parallelism() -> None:
    result, problems = plan(
        merge(
            into={"connectionName": "atlas", "coll": "$kind"},
            on=["device", "day"],
            whenMatched="replace",
            whenNotMatched="discard",
            parallelism=4,
        )
    )
    assert problems == []
    assert isinstance(result, MergePlan) and result.connection_type == "Cluster"
    assert result.on == ("device", "day") and not result.assigns_ids
    assert (result.when_matched, result.when_not_matched, result.parallelism) == (
        "replace",
        "discard",
        4,
    )
    assert computed_names(result) == {"coll": Name(None, "$kind", ("into", "coll"))}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"into": {"connectionName": "nowhere"}},
            [("unknown_connection", "/pipeline/2/$merge/into/connectionName")],
        ),
        (
            {"into": {"connectionName": "kafka"}},
            [("invalid_value", "/pipeline/2/$merge/into/connectionName")],
        ),
        (
            {"into": {"connectionName": "files"}},
            [("invalid_value", "/pipeline/2/$merge/into/connectionName")],
        ),
        (
            {"whenMatched": [{"$set": {"n": 1}}]},
            [("unsupported_option", "/pipeline/2/$merge/whenMatched")],
        ),
        (
            {"whenMatched": {"$cond": [True, "merge", "replace"]}},
            [("unsupported_option", "/pipeline/2/$merge/whenMatched")],
        ),
        (
            {"whenNotMatched": {"$literal": "insert"}},
            [("unsupported_option", "/pipeline/2/$merge/whenNotMatched")],
        ),
        ({"into": {"db": "sluice"}}, [("invalid_value", "/pipeline/2/$merge/into/db")]),
    ],
    ids=["unknown", "kafka", "file", "pipeline", "expression", "not-matched-expr", "reserved"],
)
def test_merge_problems_have_codes_and_paths(body: dict[str, Any], expected: Any) -> None:
    result, problems = plan(merge(**body))
    assert result is None
    assert problems == expected


def test_merge_fail_mode_is_refused_at_parse_time() -> None:
    from pipeline_stages._base import PipelineInvalid

    with pytest.raises(PipelineInvalid) as caught:
        parse_stage(merge(whenMatched="fail"), path="/pipeline/2")
    assert [(p.code, p.path) for p in caught.value.problems] == [
        ("unsupported_option", "/pipeline/2/$merge/whenMatched")
    ]


# ----------------------------------------------------------------------------- $emit


def test_emit_to_a_file_connection() -> None:
    result, problems = plan({"$emit": {"connectionName": "files", "path": "out/results"}})
    assert problems == []
    assert result == FileEmitPlan(connection="files", path=Name("out/results", pointer=("path",)))


@pytest.mark.parametrize("path", ["../up", "/etc", "a/../../b"])
def test_emit_file_paths_escaping_the_root_are_refused(path: str) -> None:
    result, problems = plan({"$emit": {"connectionName": "files", "path": path}})
    assert result is None
    assert problems == [("invalid_value", "/pipeline/2/$emit/path")]


def test_emit_time_series_on_a_cluster_and_plain_collection_on_local() -> None:
    timeseries = {"timeField": "ts", "metaField": "device", "granularity": "seconds"}
    body = {"connectionName": "atlas", "db": "iot", "coll": "readings", "timeseries": timeseries}
    result, problems = plan({"$emit": body})
    assert problems == []
    assert isinstance(result, CollectionEmitPlan)
    assert (result.connection_type, dict(result.timeseries or {})) == ("Cluster", timeseries)
    local, problems = plan({"$emit": {**body, "connectionName": "local"}})
    assert problems == [] and local.connection_type == "Local"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"connectionName": "atlas", "topic": "t"},
            [("invalid_combination", "/pipeline/2/$emit/topic")],
        ),
        (
            {"connectionName": "files", "db": "d", "coll": "c"},
            [("invalid_combination", "/pipeline/2/$emit/db")],
        ),
        (
            {"connectionName": "solar", "path": "x"},
            [("invalid_value", "/pipeline/2/$emit/connectionName")],
        ),
        (
            {"connectionName": "gone", "path": "x"},
            [("unknown_connection", "/pipeline/2/$emit/connectionName")],
        ),
    ],
    ids=["topic-to-cluster", "db-to-file", "sample", "unknown"],
)
def test_emit_problems_have_codes_and_paths(body: dict[str, Any], expected: Any) -> None:
    result, problems = plan({"$emit": body})
    assert result is None
    assert problems == expected


def test_emit_to_kafka_without_the_connector_is_unsupported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(planning, "kafka_writer_available", lambda: False)
    result, problems = plan({"$emit": {"connectionName": "kafka", "topic": "t"}})
    assert result is None
    assert problems == [("unsupported_option", "/pipeline/2/$emit/connectionName")]


def test_emit_to_kafka_plans_computed_values_when_the_connector_exists() -> None:
    if not planning.kafka_writer_available():
        pytest.skip("the Kafka connector's writer is not in this build")
    body = {
        "connectionName": "kafka",
        "topic": "$t",
        "config": {"key": "$k", "keyFormat": "string"},
    }
    result, problems = plan({"$emit": body})
    assert problems == []
    assert set(computed_names(result)) == {"topic", "key"}


# ----------------------------------------------------------------------------- targets, ids


def test_names_resolve_literals_and_computed_values() -> None:
    assert Name.of("plain").literal == "plain"
    assert Name.of("$field").computed and Name.of({"$concat": ["a", "b"]}).computed
    computed = Name.of("$kind", "into", "coll")
    assert resolve_name(computed, "coll", {"coll": "x"}) == "x"
    for bad in ({"coll": 3}, {"coll": ""}, {}, None):
        with pytest.raises(TargetError, match="into.coll must evaluate to a non-empty string"):
            resolve_name(computed, "coll", bad)


def test_sink_target_reads_computed_names_from_the_metadata() -> None:
    meta = json.dumps({"source": {"type": "generated"}, TARGET_META: {"db": "a", "coll": "b"}})
    assert sink_target(meta) == {"db": "a", "coll": "b"}
    assert sink_target(json.dumps({"source": {}})) is None
    assert sink_target(None) is None


def test_effective_keys_number_repeated_keys_deterministically() -> None:
    outputs = [Output("{}", "k1"), Output("{}", "k2"), Output("{}", "k1"), Output("{}", "k1")]
    first = effective_keys(outputs)
    assert first == effective_keys(list(outputs))  # a replay gets the same keys
    assert first[:2] == ["k1", "k2"] and len(set(first)) == 4


def test_with_id_keeps_an_existing_id_and_puts_a_new_one_first() -> None:
    key = "a" * 24
    assert with_id({"x": 1}, key) == {"_id": {"$oid": key}, "x": 1}
    assert list(with_id({"x": 1}, key)) == ["_id", "x"]
    assert with_id({"_id": 7, "x": 1}, key) == {"_id": 7, "x": 1}


def test_sink_dlq_records_are_deterministic_and_atlas_shaped() -> None:
    from datetime import UTC, datetime

    now = datetime(2024, 1, 1, tzinfo=UTC)
    doc = json.dumps({"a": 1, "_stream_meta": {"source": {"type": "file"}}})
    one = sink_dlq_record(
        doc, key="k", reason="r", operator="MergeOperator", processor="p", now=now
    )
    two = sink_dlq_record(
        doc, key="k", reason="r", operator="MergeOperator", processor="p", now=now
    )
    assert one == two
    assert set(one) == {
        "_id",
        "_stream_meta",
        "errInfo",
        "operatorName",
        "doc",
        "processorName",
        "dlqTime",
    }
    assert one["_stream_meta"] == {"source": {"type": "file"}}
    assert one["dlqTime"] == {"$date": "2024-01-01T00:00:00.000Z"}
