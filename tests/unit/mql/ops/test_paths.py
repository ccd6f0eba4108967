"""`set_field` / `remove_field`: `$addFields` and `$unset` writes into documents."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCollector
from pipeline_stages._mql.expressions import compile_expression, remove_field, set_field
from pipeline_stages._mql.scope import Bindings, Scope, apply_bindings

SETS = [
    ("add top level", {"a": 1}, "x", 1, {"a": 1, "x": 1}),
    ("replace", {"a": 1}, "a", "s", {"a": "s"}),
    ("missing removes", {"a": 1, "b": 2}, "a", "$$REMOVE", {"b": 2}),
    ("missing field stays absent", {"a": 1}, "x", "$nope", {"a": 1}),
    ("nested merge", {"a": {"c": 2}}, "a.b", 1, {"a": {"b": 1, "c": 2}}),
    ("nested over scalar", {"a": 5}, "a.b", 1, {"a": {"b": 1}}),
    ("nested creates", {}, "a.b", 1, {"a": {"b": 1}}),
    ("into array elements", {"a": [{"c": 1}, 2]}, "a.b", 1, {"a": [{"b": 1, "c": 1}, {"b": 1}]}),
    ("deep", {"a": {"b": {"d": 1}}}, "a.b.c", 1, {"a": {"b": {"c": 1, "d": 1}}}),
    ("computed", {"p": 3, "q": 4}, "t", {"$multiply": ["$p", "$q"]}, {"p": 3, "q": 4, "t": 12}),
    ("null value kept", {"a": 1}, "a", None, {"a": None}),
]
REMOVES = [
    ("remove top", {"a": 1, "b": 2}, "a", {"b": 2}),
    ("remove nested", {"a": {"b": 1, "c": 2}}, "a.b", {"a": {"c": 2}}),
    ("remove in array", {"a": [{"b": 1, "c": 1}, 5]}, "a.b", {"a": [{"c": 1}, 5]}),
    ("remove absent", {"a": 1}, "x.y", {"a": 1}),
    ("remove through scalar", {"a": 1}, "a.b", {"a": 1}),
]


@pytest.fixture(scope="module")
def written(spark):
    docs = [json.dumps(s[1]) for s in SETS] + [json.dumps(r[1]) for r in REMOVES]
    df = spark.createDataFrame([(i, d) for i, d in enumerate(docs)], "i int, doc string")
    df = df.select("i", F.parse_json("doc").alias("doc"))
    bindings = Bindings()
    scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"), bindings)
    problems = ProblemCollector()
    cols = []
    for i, (_, _, field, expr, _) in enumerate(SETS):
        out = set_field(F.col("doc"), field, compile_expression(expr, scope, "/e", problems))
        cols.append(F.when(F.col("i") == i, F.to_json(out.value)))
    for j, (_, _, field, _) in enumerate(REMOVES):
        cols.append(
            F.when(F.col("i") == len(SETS) + j, F.to_json(remove_field(F.col("doc"), field)))
        )
    assert not problems.problems
    rows = apply_bindings(df, bindings).select("i", F.coalesce(*cols).alias("out")).collect()
    return {row["i"]: json.loads(row["out"]) for row in rows}


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(SETS)), ids=[s[0] for s in SETS])
def test_set_field(written, index):
    assert written[index] == SETS[index][4]


@pytest.mark.spark
@pytest.mark.parametrize("index", range(len(REMOVES)), ids=[r[0] for r in REMOVES])
def test_remove_field(written, index):
    assert written[len(SETS) + index] == REMOVES[index][3]


@pytest.mark.spark
def test_set_field_keeps_value_error(spark):
    scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"))
    out = set_field(
        F.col("doc"), "x", compile_expression({"$divide": [1, 0]}, scope, "/e", ProblemCollector())
    )
    df = spark.createDataFrame([("{}",)], "doc string").select(F.parse_json("doc").alias("doc"))
    assert df.select(out.error_or_null()).first()[0] == "can't $divide by zero"


def _chain_plan_size(spark, count: int, dotted: bool) -> int:
    df = spark.createDataFrame([('{"a": {"b": 1}}',)], "doc string").select(
        F.parse_json("doc").alias("doc")
    )
    scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"))
    doc = F.col("doc")
    for i in range(count):
        name = f"a.f{i}" if dotted else f"f{i}"
        doc = set_field(doc, name, compile_expression(i, scope, "/e", ProblemCollector())).value
        doc = remove_field(doc, "a.b" if dotted else "x")
    out = df.select(F.to_json(doc).alias("d"))
    assert json.loads(out.first()["d"])  # evaluates
    return len(out._jdf.queryExecution().optimizedPlan().toString())


@pytest.mark.spark
@pytest.mark.parametrize("dotted", [False, True], ids=["top-level", "nested"])
def test_chained_writes_grow_linearly(spark, dotted):
    # $addFields with many fields chains set_field; the document must not be duplicated at
    # each step (that would double the plan per field).
    assert _chain_plan_size(spark, 8, dotted) < 3 * _chain_plan_size(spark, 4, dotted)
