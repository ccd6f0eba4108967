"""`$sort` spec: field → 1 | -1, order kept."""

from __future__ import annotations

import pytest

from pipeline_stages.sort import KEY, OPERATOR_NAME, SortSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$sort", "SortOperator")


def test_valid_keeps_key_order_and_normalises_doubles(parse_body) -> None:
    spec = parse_body(KEY, {"z": 1, "a": -1.0, "m.n": 1})
    assert isinstance(spec, SortSpec)
    assert list(spec.keys.items()) == [("z", 1), ("a", -1), ("m.n", 1)]
    assert type(spec.keys["a"]) is int


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("too_short", "")]),
        ([["a", 1]], [("dict_type", "")]),
        ({"a": 2}, [("invalid_value", "/a")]),
        ({"a": True}, [("invalid_value", "/a")]),
        ({"a": "asc"}, [("invalid_value", "/a")]),
        ({"a": {"$meta": "textScore"}}, [("invalid_value", "/a")]),
        ({"a": 1, "b": 0, "$c": 1}, [("invalid_value", "/b"), ("invalid_value", "/$c")]),
        ({f"k{i}": 1 for i in range(33)}, [("too_long", "")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_message(body_messages) -> None:
    assert body_messages(KEY, {"a": 0}) == [
        "$sort key ordering must be 1 (for ascending) or -1 (for descending), got 0"
    ]
