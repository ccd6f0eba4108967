"""Stateless stages end to end on the shared SparkSession, through `run_process`."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from service.runtime.process import run_process

pytestmark = pytest.mark.spark


def run(
    spark: Any, pipeline: list[dict[str, Any]], *, batch_size: int = 5
) -> tuple[int, list[Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_process(
        pipeline,
        out=out,
        err=err,
        batch_size=batch_size,
        max_seconds=120,
        spark_factory=lambda: spark,
    )
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def source(*docs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"$source": {"documents": list(docs), **extra}}


def strip(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in ("_ts", "_stream_meta")}


def test_unwind_set_unset(spark: Any) -> None:
    code, out, err = run(
        spark,
        [
            source(
                {"id": 1, "tags": ["a", "b"], "x": 1},
                {"id": 2, "tags": [], "x": 1},
                {"id": 3, "tags": None, "x": 1},
                {"id": 4, "x": 1},
                {"id": 5, "tags": "solo", "x": 1},
            ),
            {
                "$unwind": {
                    "path": "$tags",
                    "includeArrayIndex": "i",
                    "preserveNullAndEmptyArrays": True,
                }
            },
            {"$set": {"y": {"$multiply": ["$x", 10]}}},
            {"$unset": ["x"]},
        ],
    )
    assert code == 0, err
    assert [strip(d) for d in out] == [
        {"id": 1, "tags": "a", "i": 0, "y": 10},
        {"id": 1, "tags": "b", "i": 1, "y": 10},
        {"id": 2, "i": None, "y": 10},
        {"id": 3, "tags": None, "i": None, "y": 10},
        {"id": 4, "i": None, "y": 10},
        {"id": 5, "tags": "solo", "i": None, "y": 10},
    ]


def test_unwind_drops_null_and_empty_by_default(spark: Any) -> None:
    code, out, err = run(
        spark,
        [source({"id": 1, "t": [1, 2]}, {"id": 2, "t": []}, {"id": 3}), {"$unwind": "$t"}],
        batch_size=1,
    )
    assert code == 0, err
    assert [strip(d) for d in out] == [{"id": 1, "t": 1}, {"id": 1, "t": 2}]


def test_validate_discard_and_dlq(spark: Any) -> None:
    schema = {
        "$jsonSchema": {
            "required": ["temp"],
            "properties": {"temp": {"bsonType": "int", "minimum": 0}},
        }
    }
    docs = [{"id": 1, "temp": 5}, {"id": 2, "temp": -1}, {"id": 3}]
    code, out, err = run(spark, [source(*docs), {"$validate": {"validator": schema}}])
    assert code == 0, err
    assert [d["id"] for d in out] == [1]
    code, out, err = run(
        spark, [source(*docs), {"$validate": {"validator": schema, "validationAction": "dlq"}}]
    )
    assert code == 0, err
    assert out[0]["id"] == 1
    reasons = [d["_dlqMessage"]["errInfo"]["reason"] for d in out[1:]]
    assert reasons == ["Input document found to be invalid in $validate stage"] * 2
    assert [d["_dlqMessage"]["doc"]["id"] for d in out[1:]] == [2, 3]
    assert {d["_dlqMessage"]["operatorName"] for d in out[1:]} == {"ValidateOperator"}
    # Which rule failed, as MongoDB's validation errors say it.
    failed = [
        d["_dlqMessage"]["errInfo"]["details"]["clausesNotSatisfied"][0]["details"] for d in out[1:]
    ]
    assert failed == [
        {
            "operatorName": "$jsonSchema",
            "schemaRulesNotSatisfied": [
                {
                    "operatorName": "properties",
                    "specifiedAs": {"properties": {"temp": {"bsonType": "int", "minimum": 0}}},
                    "propertyName": "temp",
                }
            ],
        },
        {
            "operatorName": "$jsonSchema",
            "schemaRulesNotSatisfied": [
                {"operatorName": "required", "specifiedAs": {"required": ["temp"]}}
            ],
        },
    ]


def test_validate_dlq_records_name_the_failed_query_operators(spark: Any) -> None:
    validator = {"temp": {"$gte": 0}, "id": {"$lt": 3}, "$expr": {"$ne": ["$id", 4]}}
    docs = [{"id": 1, "temp": 5}, {"id": 2, "temp": -1}, {"id": 4, "temp": -2}]
    stage = {"$validate": {"validator": validator, "validationAction": "dlq"}}
    code, out, err = run(spark, [source(*docs), stage])
    assert code == 0, err
    assert out[0]["id"] == 1
    details = [d["_dlqMessage"]["errInfo"]["details"] for d in out[1:]]
    assert [d["operatorName"] for d in details] == ["$and", "$and"]
    assert details[0]["clausesNotSatisfied"] == [
        {"index": 0, "details": {"operatorName": "$gte", "specifiedAs": {"temp": {"$gte": 0}}}}
    ]
    assert [c["details"]["operatorName"] for c in details[1]["clausesNotSatisfied"]] == [
        "$gte",
        "$lt",
        "$expr",
    ]
    assert [c["index"] for c in details[1]["clausesNotSatisfied"]] == [0, 1, 2]


def test_replace_root_non_object_goes_to_dlq(spark: Any) -> None:
    code, out, err = run(
        spark,
        [
            source({"id": 1, "inner": {"k": 1}}, {"id": 2, "inner": 5}),
            {"$replaceRoot": {"newRoot": "$inner"}},
        ],
    )
    assert code == 0, err
    assert out[0] == {"k": 1}
    dlq = out[1]["_dlqMessage"]
    assert dlq["operatorName"] == "ReplaceRootOperator"
    assert "'newRoot' expression must evaluate to an object" in dlq["errInfo"]["reason"]


def test_stream_meta_redact_and_metadata_projection(spark: Any) -> None:
    code, out, err = run(
        spark,
        [
            source({"id": 1, "keep": True}, {"id": 2, "keep": False}, tsFieldName="ingestedAt"),
            {"$setStreamMeta": {"stream.tag": {"$concat": ["t", {"$toString": "$id"}]}}},
            {"$redact": {"$cond": ["$keep", "$$KEEP", "$$PRUNE"]}},
            {
                "$addFields": {
                    "tag": {"$meta": "stream.tag"},
                    "type": {"$meta": "stream.source.type"},
                }
            },
        ],
    )
    assert code == 0, err
    assert len(out) == 1
    doc = out[0]
    assert doc["tag"] == "t1" and doc["type"] == "generated"
    assert "ingestedAt" in doc and "_ts" not in doc
    assert doc["_stream_meta"]["source"] == {"type": "generated"}


def test_stream_meta_projection_can_be_disabled(spark: Any) -> None:
    code, out, err = run(spark, [source({"id": 1}, streamMetaFieldName="")])
    assert code == 0, err
    assert "_stream_meta" not in out[0] and "_ts" in out[0]


def comparable(line: dict[str, Any]) -> str:
    """A line without what legitimately differs between runs (wall-clock times)."""
    if "_dlqMessage" not in line:
        return json.dumps(line, sort_keys=True)
    dlq = {k: v for k, v in line["_dlqMessage"].items() if k != "dlqTime"}
    dlq["doc"] = strip(dlq["doc"])
    return json.dumps(dlq, sort_keys=True)


def test_results_do_not_depend_on_batch_size(spark: Any) -> None:
    docs = [{"id": i, "v": i % 4, "d": i % 3} for i in range(12)]
    pipeline = [
        source(*docs),
        {"$match": {"v": {"$ne": 3}}},
        {"$addFields": {"q": {"$divide": ["$v", "$d"]}}},
        {"$project": {"_stream_meta": 0, "_ts": 0}},
    ]
    results = []
    for size in (1, 4, 12):
        code, out, err = run(spark, pipeline, batch_size=size)
        assert code == 0, err
        results.append([comparable(line) for line in out])
    assert results[0] == results[1] == results[2]
    # 9 documents pass the $match; the 3 with d == 0 go to the DLQ (divide by zero).
    assert len(results[0]) == 9
    assert sum("_dlqMessage" in line for line in out) == 3


class _InputRows:
    """The input rows of every micro-batch of the queries that start while it listens."""

    def __init__(self) -> None:
        from pyspark.sql.streaming.listener import StreamingQueryListener

        rows: list[int] = []
        self.rows = rows

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                rows.append(event.progress.numInputRows)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        self.listener = Listener()


@pytest.mark.parametrize(
    ("config", "batch_size", "expected"),
    [
        ({}, None, [5]),  # `sluice process`'s default: the whole array at once
        ({"config": {"batchSize": 2}}, None, [2, 2, 1]),  # the pipeline's own batchSize
        ({"config": {"batchSize": 2}}, 4, [4, 1]),  # `--batch-size` over both
    ],
)
def test_process_reads_a_documents_array_in_the_batches_asked_for(
    spark: Any, config: dict[str, Any], batch_size: int | None, expected: list[int]
) -> None:
    docs = [{"i": i} for i in range(5)]
    pipeline = [source(*docs, **config)]
    batches = _InputRows()
    spark.streams.addListener(batches.listener)
    try:
        out, err = io.StringIO(), io.StringIO()
        code = run_process(
            pipeline, out=out, err=err, batch_size=batch_size, spark_factory=lambda: spark
        )
        # Spark delivers progress events asynchronously: wait for the batches of all 5 rows.
        deadline = time.monotonic() + 60
        while sum(batches.rows) < len(docs) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        spark.streams.removeListener(batches.listener)
    assert code == 0, err.getvalue()
    assert [json.loads(line)["i"] for line in out.getvalue().splitlines()] == list(range(5))
    assert [n for n in batches.rows if n] == expected


def test_inclusion_projection_keeps_the_present_fields(spark: Any) -> None:
    """An inclusion keeps `_id` and the listed fields that are present: null stays null,
    missing stays missing; nested paths and computed fields apply beside them."""
    docs = [
        {"_id": 1, "a": 1, "b": "x", "c": {"d": 2, "e": 3}, "z": 9},
        {"_id": 2, "a": None, "c": {"e": 3}},
        {"_id": 3, "b": [1, 2], "c": {"d": [1, {"e": 2}]}},
        {"a": {"$date": "2024-01-01T00:00:00Z"}, "b": "only", "c": {"d": None}},
        {"_id": 5, "c": {}},
    ]
    code, out, err = run(
        spark,
        [
            source(*docs),
            {"$project": {"a": 1, "b": 1, "c.d": 1, "twice": {"$multiply": ["$_id", 2]}}},
        ],
    )
    assert code == 0, err
    assert [strip(d) for d in out] == [
        {"_id": 1, "a": 1, "b": "x", "c": {"d": 2}, "twice": 2},
        {"_id": 2, "a": None, "c": {}, "twice": 4},
        {"_id": 3, "b": [1, 2], "c": {"d": [1, {"e": 2}]}, "twice": 6},
        {"a": {"$date": "2024-01-01T00:00:00Z"}, "b": "only", "c": {"d": None}, "twice": None},
        {"_id": 5, "c": {}, "twice": 10},
    ]
    code, out, err = run(spark, [source(*docs), {"$project": {"_id": 0, "b": 1, "k": "$a"}}])
    assert code == 0, err
    assert [strip(d) for d in out] == [
        {"b": "x", "k": 1},
        {"k": None},
        {"b": [1, 2]},
        {"b": "only", "k": {"$date": "2024-01-01T00:00:00Z"}},
        {},
    ]


def test_inclusion_of_a_dotted_path_projects_its_parent_as_mongodb_does(spark: Any) -> None:
    """`{"c.d": 1}` keeps `c` only where it is an object (with `d` if present) or an array
    (each element projected, elements that are not documents dropped); a computed path below
    it sets into what the inclusion kept."""
    docs = [
        {"_id": 1, "c": {"d": 1, "e": 2}},
        {"_id": 2, "c": {"e": 2}},
        {"_id": 3},
        {"_id": 4, "c": 5},
        {"_id": 5, "c": None},
        {"_id": 6, "c": {"$date": "2024-01-01T00:00:00Z"}},
        {"_id": 7, "c": [{"d": 1, "e": 2}, {"e": 3}, 4, [{"d": 5}, 6], None]},
        {"_id": 8, "c": {"d": {"x": 1, "y": 2}, "f": {"g": 1, "h": 2}}},
    ]
    code, out, err = run(spark, [source(*docs), {"$project": {"c.d": 1, "c.f.g": 1}}])
    assert code == 0, err
    assert [strip(d) for d in out] == [
        {"_id": 1, "c": {"d": 1}},
        {"_id": 2, "c": {}},
        {"_id": 3},
        {"_id": 4},
        {"_id": 5},
        {"_id": 6},
        {"_id": 7, "c": [{"d": 1}, {}, [{"d": 5}]]},
        {"_id": 8, "c": {"d": {"x": 1, "y": 2}, "f": {"g": 1}}},
    ]
    code, out, err = run(
        spark,
        [source(*docs[:3]), {"$project": {"_id": 0, "c.d": 1, "c.z": {"$literal": "set"}}}],
    )
    assert code == 0, err
    assert [strip(d) for d in out] == [
        {"c": {"d": 1, "z": "set"}},
        {"c": {"z": "set"}},
        {"c": {"z": "set"}},
    ]
