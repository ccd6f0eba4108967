"""`$project` spec: inclusion/exclusion rules, order kept."""

from __future__ import annotations

import pytest

from pipeline_stages.project import KEY, OPERATOR_NAME, ProjectSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$project", "ProjectOperator")


@pytest.mark.parametrize(
    ("body", "exclusion"),
    [
        ({"a": 1, "b": True}, False),
        ({"a": 1, "_id": 0}, False),
        ({"_id": 0, "a": 1}, False),
        ({"a": 0, "b": False}, True),
        ({"a": 0, "_id": 1}, True),
        ({"_id": 0}, True),
        ({"_id": 1}, False),
        ({"a": {"b": 0, "c": 0}}, True),
        ({"a": {"b": 1}, "c": "$x"}, False),
        ({"total": {"$add": ["$a", 1]}, "_id": 0}, False),
        ({"a": 0, "score": {"$meta": "textScore"}}, True),
        ({"a": 1.0, "b": 5}, False),
    ],
)
def test_valid(parse_body, body, exclusion) -> None:
    spec = parse_body(KEY, body)
    assert isinstance(spec, ProjectSpec)
    assert spec.fields == body
    assert spec.is_exclusion is exclusion


def test_order_and_numbers_kept(parse_body) -> None:
    spec = parse_body(KEY, {"z": 1, "a": 1.0, "m": {"$literal": 2}})
    assert list(spec.fields) == ["z", "a", "m"]
    assert type(spec.fields["a"]) is float


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("too_short", "")]),
        (["a"], [("dict_type", "")]),
        ({"a": 1, "b": 0}, [("invalid_combination", "/b")]),
        ({"a": 0, "b": 1}, [("invalid_combination", "/b")]),
        ({"a": 0, "b": "$x"}, [("invalid_combination", "/b")]),
        ({"a": 0, "_id": "$x"}, [("invalid_combination", "/_id")]),
        ({"a": 1, "c": {"d": 0}}, [("invalid_combination", "/c/d")]),
        ({"a": 1, "b": 0, "c": 0}, [("invalid_combination", "/b"), ("invalid_combination", "/c")]),
        ({"a": {}}, [("invalid_value", "/a")]),
        ({"$a": 1}, [("invalid_value", "/$a")]),
        ({"a..b": 1}, [("invalid_value", "/a..b")]),
        ({"a": 1, "a.b": 1}, [("invalid_combination", "/a.b")]),
        ({"a": {"b": 1}, "a.b": 1}, [("invalid_combination", "/a.b")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_mixing_messages(body_messages) -> None:
    assert body_messages(KEY, {"a": 1, "b": 0}) == [
        "Cannot do exclusion on field b in inclusion projection"
    ]
    assert body_messages(KEY, {"a": 0, "b": 1}) == [
        "Cannot do inclusion on field b in exclusion projection"
    ]
    assert body_messages(KEY, {"a": 0, "b": "$x"}) == [
        "Cannot use an expression for field b in exclusion projection"
    ]
