"""MQL's equality join in Python: arrays on either side, null vs missing, numbers by value."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from bson import Int64

from pipeline_stages._documents.values import MISSING
from pipeline_stages._enrichment.matching import (
    ForeignIndex,
    distinct_values,
    foreign_keys,
    local_keys,
)

FOREIGN = [
    {"_id": 1, "k": 1},
    {"_id": 2, "k": [2, 3]},
    {"_id": 3},
    {"_id": 4, "k": None},
    {"_id": 5, "k": 1.0},
    {"_id": 6, "k": Int64(2)},
    {"_id": 7, "k": [[2, 3]]},
    {"_id": 8, "k": "1"},
    {"_id": 9, "k": {"a": 1, "b": 2}},
    {"_id": 10, "k": {"b": 2, "a": 1}},
    {"_id": 11, "k": Decimal("3.0")},
    {"_id": 12, "k": True},
]


def matched(local: Any, docs: list[dict[str, Any]] = FOREIGN, field: str = "k") -> list[Any]:
    return [d["_id"] for d in ForeignIndex(docs, field).matches(local_keys(local))]


@pytest.mark.parametrize(
    ("local", "expected"),
    [
        (1, [1, 5]),  # 1 == 1.0, not "1", not true
        (Int64(1), [1, 5]),
        (2, [2, 6]),  # by an element of a foreign array, and a long
        (3, [2, 11]),  # decimal 3.0 == 3
        ([2, 3], [2, 6, 7, 11]),  # each element, and [2, 3] itself (inside _id 7's array)
        (None, [3, 4]),  # null matches null and missing
        (MISSING, [3, 4]),
        ([], []),
        ({"a": 1, "b": 2}, [9]),  # object field order matters
        ("1", [8]),
        (True, [12]),
        ("nope", []),
    ],
)
def test_local_values(local: Any, expected: list[Any]) -> None:
    assert matched(local) == expected


def test_dotted_foreign_path_through_arrays() -> None:
    docs = [
        {"_id": 1, "a": [{"b": 1}, {"b": 2}]},
        {"_id": 2, "a": {"b": 2}},
        {"_id": 3, "a": [{"c": 1}]},
        {"_id": 4},
    ]
    assert matched(2, docs, "a.b") == [1, 2]
    assert matched(None, docs, "a.b") == [3, 4]


def test_each_document_once_in_store_order() -> None:
    docs = [{"_id": 1, "k": [1, 2]}, {"_id": 2, "k": 2}]
    assert matched([2, 1], docs) == [1, 2]


def test_foreign_keys_of_a_missing_field() -> None:
    assert foreign_keys({"_id": 1}, "k") == foreign_keys({"k": None}, "k")


def test_distinct_values_by_mql_equality() -> None:
    assert distinct_values([1, 1.0, Int64(1), "1", None, None, [1], [1.0]]) == [1, "1", None, [1]]
