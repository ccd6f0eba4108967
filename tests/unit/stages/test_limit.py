"""`$limit` spec: a positive whole number."""

from __future__ import annotations

import pytest

from pipeline_stages.limit import KEY, OPERATOR_NAME, LimitSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$limit", "LimitOperator")


@pytest.mark.parametrize(("body", "expected"), [(5, 5), (5.0, 5), (1, 1)])
def test_valid(parse_body, body, expected) -> None:
    spec = parse_body(KEY, body)
    assert isinstance(spec, LimitSpec)
    assert spec.limit == expected
    assert type(spec.limit) is int


def test_python_construction_by_name() -> None:
    assert LimitSpec(limit=3).limit == 3


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (0, [("greater_than", "")]),
        (-2, [("greater_than", "")]),
        (1.5, [("int_type", "")]),
        ("5", [("int_type", "")]),
        (True, [("int_type", "")]),
        (None, [("int_type", "")]),
        ({"n": 5}, [("int_type", "")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_message_says_what_was_received(body_messages) -> None:
    assert body_messages(KEY, -2) == ["$limit takes a positive integer, got -2"]
