"""Shared harness of the expression tests: evaluate many (expression, document) cases at once.

Every case becomes one row (its document) and one output column computed only on that row,
so a whole table of cases costs one Spark job. Values come back as `to_json` text parsed with
`json.loads`; note that Spark renders a double with an integral value that was *parsed* from
input JSON (`1.0`) as `1`, while computed doubles print as `1.0`; compare numbers with `==`
and check int-vs-double with `is_int`/`is_double` where it matters.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCollector
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.scope import Bindings, Scope, apply_bindings

MISSING = object()


@dataclass(frozen=True)
class Outcome:
    """What one case evaluated to: the JSON text (None = missing) or an error message."""

    text: str | None
    error: str | None

    @property
    def value(self) -> Any:
        """The decoded value, `MISSING` when the expression was missing."""
        return MISSING if self.text is None else json.loads(self.text)


def evaluate(
    spark: Any,
    cases: list[tuple[Any, dict[str, Any]]],
    meta: dict[str, Any] | None = None,
    chunk: int = 10,
) -> list[Outcome]:
    """Evaluate `(expression, document)` pairs; raises if any expression fails to compile."""
    outcomes: list[Outcome] = []
    for start in range(0, len(cases), chunk):
        outcomes += _evaluate_chunk(spark, cases[start : start + chunk], meta or {})
    return outcomes


def _evaluate_chunk(
    spark: Any, cases: list[tuple[Any, dict[str, Any]]], meta: dict[str, Any]
) -> list[Outcome]:
    rows = [(i, json.dumps(doc), json.dumps(meta)) for i, (_, doc) in enumerate(cases)]
    df = spark.createDataFrame(rows, "i int, doc string, meta string")
    df = df.select("i", F.parse_json("doc").alias("doc"), F.parse_json("meta").alias("meta"))
    bindings = Bindings()
    scope = Scope.for_document(F.col("doc"), F.col("meta"), bindings)
    problems = ProblemCollector()
    outputs = []
    for i, (expr, _) in enumerate(cases):
        compiled = compile_expression(expr, scope, f"/case/{i}", problems)
        mine = F.col("i") == i
        outputs.append(F.when(mine, F.to_json(compiled.value)).alias(f"v{i}"))
        outputs.append(F.when(mine, compiled.error_or_null()).alias(f"e{i}"))
    if problems.problems:
        raise AssertionError(f"compile problems: {[p.to_dict() for p in problems.problems]}")
    rows_out = apply_bindings(df, bindings).select("i", *outputs).collect()
    by_case = {row["i"]: row for row in rows_out}
    return [Outcome(by_case[i][f"v{i}"], by_case[i][f"e{i}"]) for i in range(len(cases))]


def compile_problems(expr: Any) -> list[dict[str, str]]:
    """The compile-time problems of an expression (needs an active SparkSession)."""
    problems = ProblemCollector()
    scope = Scope.for_document(F.col("doc"), F.col("meta"))
    compile_expression(expr, scope, "/e", problems)
    return [p.to_dict() for p in problems.problems]


@dataclass(frozen=True)
class Err:
    """Expect a per-document error whose message contains `text`."""

    text: str


@dataclass(frozen=True)
class Approx:
    """Expect a double close to `value`."""

    value: float
    tolerance: float = 1e-9


def same(actual: Any, expected: Any) -> bool:
    """Deep equality that keeps int and double apart (`3` is not `3.0`)."""
    if isinstance(expected, Approx):
        return isinstance(actual, float) and abs(actual - expected.value) <= expected.tolerance
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(same(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, dict):
        return (
            isinstance(actual, dict)
            and actual.keys() == expected.keys()
            and all(same(actual[k], v) for k, v in expected.items())
        )
    return actual == expected


def mismatch(outcome: Outcome, expected: Any) -> str | None:
    """None when `outcome` matches `expected` (a value, `MISSING` or `Err`), else why not."""
    if isinstance(expected, Err):
        if outcome.error is None or expected.text not in outcome.error:
            return f"expected error containing {expected.text!r}, got value {outcome.text} / error {outcome.error!r}"
        return None
    if outcome.error is not None:
        return f"expected {expected!r}, got error {outcome.error!r}"
    if expected is MISSING:
        return None if outcome.text is None else f"expected missing, got {outcome.text}"
    if outcome.text is None:
        return f"expected {expected!r}, got missing"
    if not same(outcome.value, expected):
        return f"expected {expected!r}, got {outcome.text}"
    return None


Case = tuple[str, Any, dict[str, Any], Any]


def case_ids(cases: list[Case]) -> list[str]:
    """pytest ids for a case table."""
    return [c[0] for c in cases]
