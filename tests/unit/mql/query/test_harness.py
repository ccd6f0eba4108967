"""Shared harness of the query-filter tests: evaluate whole tables in a few Spark jobs.

A table is a list of `(filter, document, expected)` rows. The distinct documents become the
rows of one DataFrame and each distinct filter one BOOLEAN column over it, evaluated in
chunks (one Spark job per chunk), so a table of hundreds of rows costs a handful of jobs.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCollector
from pipeline_stages._mql.query.compile import compile_filter
from pipeline_stages._mql.scope import Bindings, Scope, apply_bindings

Row = tuple[Any, Any, bool]


def key(value: Any) -> str:
    """A canonical text for a filter or document (dict key order preserved)."""
    return json.dumps(value)


def row_id(row: Row) -> str:
    """A readable pytest id for a table row."""
    filter_, doc, expected = row
    return f"{key(filter_)} ~ {key(doc)} -> {expected}"[:160]


def evaluate(spark: Any, rows: list[Row], chunk: int = 25) -> dict[tuple[str, str], bool]:
    """The condition of every row's filter on its document, keyed by `(key(f), key(doc))`.

    Raises when a filter records compile problems or can fail at run time.
    """
    docs = list(dict.fromkeys(key(doc) for _, doc, _ in rows))
    filters = list(dict.fromkeys(key(f) for f, _, _ in rows))
    frame = spark.createDataFrame(list(enumerate(docs)), "i int, doc string")
    frame = frame.select("i", F.parse_json("doc").alias("doc"))
    results: dict[tuple[str, str], bool] = {}
    for start in range(0, len(filters), chunk):
        part = filters[start : start + chunk]
        bindings = Bindings()
        scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"), bindings)
        columns = [_condition(json.loads(f), scope, n) for n, f in enumerate(part)]
        out = apply_bindings(frame, bindings).select("i", *columns).collect()
        for record in out:
            for n, f in enumerate(part):
                results[(f, docs[record["i"]])] = record[f"f{n}"]
    return results


def _condition(filter_: Any, scope: Scope, n: int) -> Any:
    problems = ProblemCollector()
    predicate = compile_filter(filter_, scope, "/filter", problems)
    if problems.problems:
        raise AssertionError(f"{filter_}: {[p.to_dict() for p in problems.problems]}")
    if predicate.error is not None:
        raise AssertionError(f"{filter_}: unexpected error column")
    return predicate.condition.alias(f"f{n}")


def problems_of(filter_: Any) -> list[tuple[str, str]]:
    """`(code, path)` of every compile problem of `filter_` (needs an active session)."""
    problems = ProblemCollector()
    scope = Scope.for_document(F.col("doc"), F.lit(None).cast("variant"))
    compile_filter(filter_, scope, "/pipeline/1/$match", problems)
    return [(p.code, p.path) for p in problems.problems]


def expand(docs: dict[str, Any], queries: list[tuple[Any, set[str]]]) -> list[Row]:
    """Rows from `(filter, ids of the documents it matches)` over named documents."""
    return [(query, doc, name in ids) for query, ids in queries for name, doc in docs.items()]
