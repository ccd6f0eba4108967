"""The window operator's own `$match` (`runtime.query`, for `$match` after a window's `$group`
with `trigger`) against the query semantics tables the native filter translator is held to
(`tests/unit/mql/query`: MongoDB's documented behaviour and its null-query jstest): every
row whose filter the operator evaluates must give the table's answer, and the operators it
does not evaluate are named, so the compile refuses them rather than guess."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._windowing.runtime.query import matches, unsupported
from tests.unit.mql.query import test_operators, test_semantics
from tests.unit.mql.query.test_harness import Row, row_id

TABLES: list[Row] = test_semantics.ROWS + test_operators.ROWS
EVALUATED = [row for row in TABLES if unsupported(row[0]) is None]


def test_the_tables_cover_every_operator_the_operator_evaluates() -> None:
    used: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            used.update(k for k in value if k.startswith("$"))
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for filter_, _, _ in EVALUATED:
        walk(filter_)
    operators = {"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not"}
    assert operators | {"$and", "$or", "$nor"} <= used
    assert len(EVALUATED) > 200


@pytest.mark.parametrize("row", EVALUATED, ids=row_id)
def test_the_operator_matches_as_mongodb_does(row: Row) -> None:
    filter_, doc, expected = row
    assert matches(filter_, from_ejson(doc)) is expected


@pytest.mark.parametrize(
    ("filter_", "named"),
    [
        ({"a": {"$regex": "^x"}}, "$regex"),
        ({"$expr": {"$gt": ["$a", 1]}}, "$expr"),
        ({"a": {"$elemMatch": {"$gt": 1}}}, "$elemMatch"),
        ({"$or": [{"a": 1}, {"b": {"$type": "string"}}]}, "$type"),
        ({"a": {"$not": {"$size": 1}}}, "$size"),
        ({"a": {"$in": [{"$regex": "^x"}]}}, "a regular expression in $in"),
        ({"$and": []}, "$and takes a non-empty array of filters"),
    ],
)
def test_what_the_operator_does_not_evaluate_is_named(filter_: Any, named: str) -> None:
    assert unsupported(filter_) == named
