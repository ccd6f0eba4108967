"""`scan_pipeline`: unknown and unsupported operators found before Spark, as the compilers say.

The Spark-free tests pin paths and codes; the `spark` tests compile the same expressions and
filters and check that the scan reports exactly the compilers' operator problems.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import PipelineInvalid, ProblemCollector
from pipeline_stages._mql.names import (
    EXPRESSION_OPERATORS,
    QUERY_FIELD_OPERATORS,
    UNSUPPORTED_EXPRESSION_OPERATORS,
)
from pipeline_stages._mql.scan import scan_pipeline

OPERATOR_CODES = ("unknown_operator", "unsupported_option")
SOURCE = {"$source": {"connectionName": "c"}}

EXPRESSIONS: list[Any] = [
    {"$flor": 1.5},
    {"$add": [1, {"$bogus": 2}]},
    {"$add": [{"$x1": 1}, {"$x2": 2}]},
    {"$cond": {"if": {"$gtt": ["$a", 1]}, "then": {"$zip": 1}, "else": 0}},
    {"$let": {"vars": {"x": {"$nope": 1}}, "in": {"$add": ["$$x", {"$rand": {}}]}}},
    {"$map": {"input": "$xs", "as": "x", "in": {"$mul": ["$$x", 2]}}},
    {"$literal": {"$foo": 1}},
    {"$date": "2024-01-01T00:00:00Z"},
    {"a": {"b": {"$nope/x": 1}}},
    {"$switch": {"branches": [{"case": {"$eqq": [1, 1]}, "then": 1}], "default": 2}},
]

FILTERS: list[Any] = [
    {"a": {"$foo": 1}},
    {"a": {"$gt": 1, "$lx": 2}},
    {"a": {"$jsonSchema": {}}},
    {"x/y": {"$foo": 1}},
    {"$foo": 1},
    {"a": {"$not": {"b": 1}}},
    {"a": {"$near": [0, 0]}},
    {"$where": "this.a > 1"},
    {"$or": [{"a": {"$gtt": 1}}, {"$expr": {"$foo": 1}}]},
    {"a": {"$elemMatch": {"b": {"$x": 1}, "$and": [{"c": {"$y": 1}}]}}},
    {"a": {"$elemMatch": {"$gt": 1, "$z": 2}}},
    {"a": {"$not": {"$regularExpression": {"pattern": "x", "options": ""}}}},
    {"a": {"$date": "2024-01-01T00:00:00Z"}},
    {"$comment": "x", "$jsonSchema": {"required": ["a"]}},
]


def _scan(stages: list[Any]) -> list[tuple[str, str, str]]:
    return [(p.code, p.path, p.message) for p in scan_pipeline([SOURCE, *stages])]


def test_the_name_lists_match_the_compilers_tables() -> None:
    from pipeline_stages._mql.expressions import OPS
    from pipeline_stages._mql.query.ops import _HANDLERS

    assert set(OPS) == EXPRESSION_OPERATORS
    assert set(_HANDLERS) == QUERY_FIELD_OPERATORS
    assert not EXPRESSION_OPERATORS & UNSUPPORTED_EXPRESSION_OPERATORS


@pytest.mark.parametrize(
    ("stage", "path"),
    [
        ({"$addFields": {"a": {"b": {"$foo": 1}}}}, "/pipeline/1/$addFields/a/b/$foo"),
        ({"$set": {"a": {"$foo": 1}}}, "/pipeline/1/$set/a/$foo"),
        ({"$project": {"a": {"$foo": 1}}}, "/pipeline/1/$project/a/$foo"),
        ({"$replaceRoot": {"newRoot": {"$foo": 1}}}, "/pipeline/1/$replaceRoot/newRoot/$foo"),
        ({"$replaceWith": {"$foo": 1}}, "/pipeline/1/$replaceWith/$foo"),
        ({"$redact": {"$foo": 1}}, "/pipeline/1/$redact/$foo"),
        ({"$match": {"$expr": {"$foo": 1}}}, "/pipeline/1/$match/$expr/$foo"),
        (
            {"$validate": {"validator": {"a": {"$foo": 1}}}},
            "/pipeline/1/$validate/validator/a/$foo",
        ),
        ({"$setStreamMeta": {"k": {"$foo": 1}}}, "/pipeline/1/$setStreamMeta/k/$foo"),
        ({"$lookup": {"let": {"v": {"$foo": 1}}}}, "/pipeline/1/$lookup/let/v/$foo"),
        ({"$https": {"headers": {"h": {"$foo": 1}}}}, "/pipeline/1/$https/headers/h/$foo"),
        (
            {"$tumblingWindow": {"pipeline": [{"$group": {"_id": {"$foo": 1}}}]}},
            "/pipeline/1/$tumblingWindow/pipeline/0/$group/_id/$foo",
        ),
        (
            {"$hoppingWindow": {"pipeline": [{"$group": {"_id": 1, "t": {"$sum": {"$foo": 1}}}}]}},
            "/pipeline/1/$hoppingWindow/pipeline/0/$group/t/$sum/$foo",
        ),
        (
            {"$sessionWindow": {"partitionBy": {"$foo": 1}, "pipeline": []}},
            "/pipeline/1/$sessionWindow/partitionBy/$foo",
        ),
        (
            {
                "$tumblingWindow": {
                    "pipeline": [
                        {
                            "$group": {
                                "_id": 1,
                                "t": {"$top": {"sortBy": {"a": 1}, "output": {"$foo": 1}}},
                            }
                        }
                    ]
                }
            },
            "/pipeline/1/$tumblingWindow/pipeline/0/$group/t/$top/$foo",
        ),
    ],
)
def test_each_stage_is_scanned_where_its_compiler_reads(stage: Any, path: str) -> None:
    assert [(code, where) for code, where, _ in _scan([stage])] == [("unknown_operator", path)]


def test_the_source_time_field_is_scanned() -> None:
    raw = [{"$source": {"connectionName": "c", "timeField": {"$toDatee": "$ts"}}}]
    [problem] = scan_pipeline(raw)
    assert (problem.code, problem.path) == (
        "unknown_operator",
        "/pipeline/0/$source/timeField/$toDatee",
    )
    assert "did you mean '$toDate'?" in problem.message


def test_parse_reports_operators_beside_structural_problems() -> None:
    raw = [
        {"$source": {"connectionName": "c", "initialSync": {}}},
        {"$groop": {}},
        {"$addFields": {"a": {"$foo": 1}}},
        {"$match": {"b": {"$gtt": 1}}},
        {"$limit": 0},
    ]
    with pytest.raises(PipelineInvalid) as caught:
        parse_pipeline(raw)
    found = [(p.code, p.path) for p in caught.value.problems]
    assert ("unknown_stage", "/pipeline/1") in found
    assert ("unknown_operator", "/pipeline/2/$addFields/a/$foo") in found
    assert ("unknown_operator", "/pipeline/3/$match/b/$gtt") in found
    assert ("greater_than", "/pipeline/4/$limit") in found
    assert len(found) == len(set(found))


def test_valid_pipelines_have_no_operator_problems() -> None:
    raw = [
        SOURCE,
        {"$match": {"a": {"$gte": 1, "$in": [1, 2]}, "$expr": {"$gt": ["$a", 0]}}},
        {
            "$addFields": {
                "d": {"$dateTrunc": {"date": "$t", "unit": "hour"}},
                "n": {"$literal": {"$x": 1}},
            }
        },
    ]
    assert scan_pipeline(raw) == []


def _compiled_expression(expr: Any) -> list[tuple[str, str, str]]:
    from pyspark.sql import functions as F

    from pipeline_stages._mql.expressions import Scope, compile_expression

    problems = ProblemCollector()
    scope = Scope.for_document(F.col("doc"), F.col("meta"))
    compile_expression(expr, scope, "/pipeline/1/$replaceWith", problems)
    return [(p.code, p.path, p.message) for p in problems.problems if p.code in OPERATOR_CODES]


def _compiled_filter(filter_: Any) -> list[tuple[str, str, str]]:
    from pyspark.sql import functions as F

    from pipeline_stages._mql.expressions import Scope
    from pipeline_stages._mql.query.compile import compile_filter

    problems = ProblemCollector()
    scope = Scope.for_document(F.col("doc"), F.col("doc"))
    compile_filter(filter_, scope, "/pipeline/1/$match", problems)
    return [(p.code, p.path, p.message) for p in problems.problems if p.code in OPERATOR_CODES]


@pytest.mark.spark
@pytest.mark.parametrize("expr", EXPRESSIONS, ids=[str(e) for e in EXPRESSIONS])
def test_expression_scan_matches_the_compiler(spark: Any, expr: Any) -> None:
    assert _scan([{"$replaceWith": expr}]) == _compiled_expression(expr)


@pytest.mark.spark
@pytest.mark.parametrize("filter_", FILTERS, ids=[str(f) for f in FILTERS])
def test_filter_scan_matches_the_compiler(spark: Any, filter_: Any) -> None:
    assert _scan([{"$match": filter_}]) == _compiled_filter(filter_)
