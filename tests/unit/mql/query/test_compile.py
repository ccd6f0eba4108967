"""Compiling query filters: problem reporting, plan size, `$expr` and per-document errors."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCollector
from pipeline_stages._mql.query.compile import all_of, any_of, compile_filter
from pipeline_stages._mql.scope import Bindings, Predicate, Scope, apply_bindings, drop_bindings

from .test_harness import problems_of

M = "/pipeline/1/$match"
RX = {"$regularExpression": {"pattern": "x", "options": ""}}

INVALID: list[tuple[Any, str, str]] = [
    ([1], "invalid_arguments", M),
    ({"a": {"$in": 5}}, "invalid_arguments", f"{M}/a/$in"),
    ({"a": {"$nin": {}}}, "invalid_arguments", f"{M}/a/$nin"),
    ({"a": {"$in": [1, {"$gt": 5}]}}, "invalid_arguments", f"{M}/a/$in/1"),
    ({"a.b": {"$in": [1, {"$oid": "zz"}]}}, "invalid_arguments", f"{M}/a.b/$in/1"),
    ({"a": {"$size": -1}}, "invalid_arguments", f"{M}/a/$size"),
    ({"a": {"$size": 1.5}}, "invalid_arguments", f"{M}/a/$size"),
    ({"a": {"$size": "1"}}, "invalid_arguments", f"{M}/a/$size"),
    ({"a": {"$mod": 5}}, "invalid_arguments", f"{M}/a/$mod"),
    ({"a": {"$mod": [1]}}, "invalid_arguments", f"{M}/a/$mod"),
    ({"a": {"$mod": [1, 2, 3]}}, "invalid_arguments", f"{M}/a/$mod"),
    ({"a": {"$mod": [0, 1]}}, "invalid_arguments", f"{M}/a/$mod/0"),
    ({"a": {"$mod": ["x", 1]}}, "invalid_arguments", f"{M}/a/$mod/0"),
    ({"a": {"$regex": "x", "$options": "q"}}, "invalid_arguments", f"{M}/a/$regex"),
    ({"a": {"$regex": "("}}, "invalid_arguments", f"{M}/a/$regex"),
    ({"a": {"$regex": 5}}, "invalid_arguments", f"{M}/a/$regex"),
    ({"a": {"$options": "i"}}, "invalid_arguments", f"{M}/a/$options"),
    ({"a": {"$gt": RX}}, "invalid_arguments", f"{M}/a/$gt"),
    ({"a": {"$ne": RX}}, "invalid_arguments", f"{M}/a/$ne"),
    ({"a": {"$date": "not a date"}}, "invalid_arguments", f"{M}/a"),
    ({"a": {"$type": "foo"}}, "invalid_arguments", f"{M}/a/$type"),
    ({"a": {"$type": ["string", 99]}}, "invalid_arguments", f"{M}/a/$type/1"),
    ({"a": {"$type": []}}, "invalid_arguments", f"{M}/a/$type"),
    ({"a": {"$type": True}}, "invalid_arguments", f"{M}/a/$type"),
    ({"a": {"$all": 5}}, "invalid_arguments", f"{M}/a/$all"),
    ({"a": {"$all": [{"$gt": 1}]}}, "invalid_arguments", f"{M}/a/$all/0"),
    ({"a": {"$not": {}}}, "invalid_arguments", f"{M}/a/$not"),
    ({"a": {"$not": 5}}, "invalid_arguments", f"{M}/a/$not"),
    ({"a": {"$not": {"b": 1}}}, "unknown_operator", f"{M}/a/$not/b"),
    ({"a": {"$elemMatch": 5}}, "invalid_arguments", f"{M}/a/$elemMatch"),
    ({"a": {"$elemMatch": {"b": {"$in": 1}}}}, "invalid_arguments", f"{M}/a/$elemMatch/b/$in"),
    ({"a": {"$elemMatch": {"$expr": True}}}, "invalid_arguments", f"{M}/a/$elemMatch/$expr"),
    ({"a": {"$foo": 1}}, "unknown_operator", f"{M}/a/$foo"),
    ({"a": {"$gt": 1, "$lx": 2}}, "unknown_operator", f"{M}/a/$lx"),
    ({"a": {"$jsonSchema": {}}}, "unknown_operator", f"{M}/a/$jsonSchema"),
    ({"x/y": {"$foo": 1}}, "unknown_operator", f"{M}/x~1y/$foo"),
    ({"$foo": 1}, "unknown_operator", f"{M}/$foo"),
    ({"a": {"$near": [0, 0]}}, "unsupported_option", f"{M}/a/$near"),
    ({"a": {"$nearSphere": [0, 0]}}, "unsupported_option", f"{M}/a/$nearSphere"),
    ({"a": {"$geoWithin": {"$center": [[0, 0], 1]}}}, "unsupported_option", f"{M}/a/$geoWithin"),
    ({"a": {"$geoIntersects": {}}}, "unsupported_option", f"{M}/a/$geoIntersects"),
    ({"a": {"$bitsAllSet": 5}}, "unsupported_option", f"{M}/a/$bitsAllSet"),
    ({"$where": "this.a > 1"}, "unsupported_option", f"{M}/$where"),
    ({"$text": {"$search": "x"}}, "unsupported_option", f"{M}/$text"),
    ({"$and": []}, "invalid_arguments", f"{M}/$and"),
    ({"$or": {}}, "invalid_arguments", f"{M}/$or"),
    ({"$nor": [1]}, "invalid_arguments", f"{M}/$nor/0"),
    ({"$or": [{"a": {"$in": 1}}]}, "invalid_arguments", f"{M}/$or/0/a/$in"),
    ({"$jsonSchema": 5}, "invalid_arguments", f"{M}/$jsonSchema"),
]


@pytest.mark.spark
@pytest.mark.parametrize("filter_,code,path", INVALID, ids=[json.dumps(r[0]) for r in INVALID])
def test_invalid_filter_reports_code_and_path(
    spark: Any, filter_: Any, code: str, path: str
) -> None:
    assert problems_of(filter_) == [(code, path)]


@pytest.mark.spark
def test_every_problem_is_collected_in_order(spark: Any) -> None:
    filter_ = {"a": {"$in": 5}, "b": {"$size": -1}, "$foo": 1, "c": {"$near": 1}}
    assert problems_of(filter_) == [
        ("invalid_arguments", f"{M}/a/$in"),
        ("invalid_arguments", f"{M}/b/$size"),
        ("unknown_operator", f"{M}/$foo"),
        ("unsupported_option", f"{M}/c/$near"),
    ]


@pytest.mark.spark
def test_unknown_operators_suggest_the_closest_name(spark: Any) -> None:
    problems = ProblemCollector()
    scope = Scope.for_document(F.col("doc"), F.col("doc"))
    compile_filter({"a": {"$gte": 1, "$lx": 2}, "$nro": []}, scope, M, problems)
    messages = [p.message for p in problems.problems]
    assert "did you mean '$lt'?" in messages[0]
    assert "did you mean '$nor'?" in messages[1]


def _frame(spark: Any, docs: list[dict[str, Any]]) -> Any:
    rows = [(i, json.dumps(doc)) for i, doc in enumerate(docs)]
    df = spark.createDataFrame(rows, "i int, doc string")
    return df.select("i", F.parse_json("doc").alias("doc"))


@pytest.mark.spark
def test_realistic_filter_compiles_to_a_small_plan(spark: Any) -> None:
    filter_ = {"a": {"$gte": 5, "$lt": 10}, "b": {"$in": ["x", "y"]}, "c.d": {"$exists": True}}
    docs = [
        {"a": 5, "b": "x", "c": {"d": 0}},
        {"a": 9.5, "b": ["q", "y"], "c": [{"e": 1}, {"d": None}]},
        {"a": 10, "b": "x", "c": {"d": 0}},
        {"a": 7, "b": "z", "c": {"d": 0}},
        {"a": 7, "b": "x", "c": {"e": 0}},
        {"a": "7", "b": "x", "c": {"d": 0}},
        {"a": [1, 20], "b": "y", "c": {"d": {"e": 1}}},
    ]
    problems = ProblemCollector()
    bindings = Bindings()
    scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"), bindings)
    predicate = compile_filter(filter_, scope, M, problems)
    assert not problems.problems and predicate.error is None
    # As a stage does: materialise the bindings, filter, drop them.
    df = apply_bindings(_frame(spark, docs), bindings).where(predicate.condition)
    df = drop_bindings(df, bindings)
    explained = spark._jvm.org.apache.spark.sql.api.python.PythonSQLUtils.explainString(
        df._jdf.queryExecution(), "codegen"
    )
    method_sizes = [int(n) for n in re.findall(r"maxMethodCodeSize:(\d+)", explained)]
    # HotSpot does not JIT-compile methods over 8000 bytes of bytecode; stay well below.
    assert method_sizes and max(method_sizes) < 6000
    assert explained.count("\n") < 2500
    assert len(str(predicate.condition)) < 6000
    assert sorted(r["i"] for r in df.select("i").collect()) == [0, 1, 6]


@pytest.mark.spark
def test_error_columns_combine_with_short_circuit(spark: Any) -> None:
    df = spark.createDataFrame([(a, z) for a in (0, 1) for z in (0, 1)], "a int, z int")
    boom = Predicate(F.lit(True), F.when(F.col("z") == 0, F.lit("boom")))
    a_is_1 = Predicate(F.col("a") == 1)
    both, either = all_of([a_is_1, boom]), any_of([a_is_1, boom])
    rows = df.select("a", "z", both.error.alias("and_e"), either.error.alias("or_e")).collect()
    for r in rows:
        # AND fails only where the infallible side does not already make it false.
        assert r["and_e"] == ("boom" if r["z"] == 0 and r["a"] == 1 else None)
        # OR fails only where the infallible side does not already make it true.
        assert r["or_e"] == ("boom" if r["z"] == 0 and r["a"] == 0 else None)


def _expressions_available() -> bool:
    try:
        import pipeline_stages._mql.expressions  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


@pytest.mark.spark
@pytest.mark.skipif(not _expressions_available(), reason="expression compiler not present yet")
def test_expr_uses_aggregation_semantics_and_reports_errors(spark: Any) -> None:
    filters = {
        "gt": {"$expr": {"$gt": ["$a", "$b"]}},
        "truthy": {"$expr": "$a"},
        "and": {"b": 1, "$expr": {"$divide": [1, "$z"]}},
        "or": {"$or": [{"b": 1}, {"$expr": {"$divide": [1, "$z"]}}]},
    }
    docs = [{"a": 2, "b": 1, "z": 0}, {"a": 0, "b": 2, "z": 0}, {"a": 1, "b": 2, "z": 1}]
    bindings = Bindings()
    scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"), bindings)
    problems = ProblemCollector()
    columns = []
    for name, filter_ in filters.items():
        predicate = compile_filter(filter_, scope, f"{M}/{name}", problems)
        error = predicate.error if predicate.error is not None else F.lit(None).cast("string")
        columns += [predicate.condition.alias(name), error.alias(f"{name}_e")]
    assert not problems.problems
    out = apply_bindings(_frame(spark, docs), bindings).select("i", *columns).collect()
    rows = {r["i"]: r for r in out}
    assert [rows[i]["gt"] for i in range(3)] == [True, False, False]
    assert [rows[i]["truthy"] for i in range(3)] == [True, False, True]
    assert [rows[i]["gt_e"] for i in range(3)] == [None, None, None]
    # doc 0: b == 1, so `$expr` runs and divides by zero; doc 1: b != 1 decides the AND.
    assert "divide by zero" in rows[0]["and_e"]
    assert rows[1]["and_e"] is None and rows[2]["and_e"] is None
    # OR: doc 0 is decided by b == 1; doc 1 must evaluate `$expr` and fails.
    assert rows[0]["or_e"] is None and "divide by zero" in rows[1]["or_e"]
    assert rows[2]["or"] is True and rows[2]["or_e"] is None


NUMBER_TEXT_VALUES = [
    "0",
    "-0",
    "7",
    "-12",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "57.5",
    "-0.0",
    "5.0",
    "1.5e300",
    "-2E-5",
    "1e3",
    '"5"',
    '"NaN"',
    '"-1"',
    "true",
    "false",
    "null",
    "[1]",
    "{}",
    '{"a": 1}',
    '{"$numberLong": "5"}',
    '{"$numberDecimal": "5.5"}',
    '{"$date": "2024-01-01T00:00:00Z"}',
]


@pytest.mark.spark
def test_number_reads_skip_only_texts_that_cannot_cast(spark: Any) -> None:
    """The gated reads of a value's JSON text equal an ungated `try_cast` for every kind of
    value `to_json` writes (the gate only saves Spark's throw-and-catch on a failed cast)."""
    from pipeline_stages._mql.query.values import Typed

    df = spark.createDataFrame([(t,) for t in NUMBER_TEXT_VALUES], "t string").select(
        "t", F.parse_json("t").alias("v")
    )
    typed = Typed.of(F.col("v"))
    rows = df.select(
        "t",
        typed._as_whole().alias("whole"),
        typed.json.try_cast("bigint").alias("whole_cast"),
        typed._as_real().alias("real"),
        typed.json.try_cast("double").alias("real_cast"),
    ).collect()
    assert len(rows) == len(NUMBER_TEXT_VALUES)
    for row in rows:
        assert (row.whole, row.real) == (row.whole_cast, row.real_cast), row.t
    assert {r.t for r in rows if r.whole is not None} >= {"7", "-12", "9223372036854775807"}
    assert {r.t for r in rows if r.real is not None} >= {"57.5", "1.5e300", "-2E-5"}
