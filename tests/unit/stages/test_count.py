"""`$count` spec: the output field name."""

from __future__ import annotations

import pytest

from pipeline_stages.count import KEY, OPERATOR_NAME, CountSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$count", "GroupOperator")


def test_valid(parse_body) -> None:
    spec = parse_body(KEY, "total")
    assert isinstance(spec, CountSpec)
    assert spec.field == "total"


@pytest.mark.parametrize(
    ("body", "expected", "message"),
    [
        ("", "string_type", 'the count field must be a non-empty string, got ""'),
        (5, "string_type", "the count field must be a non-empty string, got 5"),
        ("$n", "invalid_value", 'the count field cannot be a $-prefixed path, got "$n"'),
        ("a.b", "invalid_value", "the count field cannot contain '.', got \"a.b\""),
    ],
)
def test_invalid(body_problems, body_messages, body, expected, message) -> None:
    assert body_problems(KEY, body) == [(expected, "")]
    assert body_messages(KEY, body) == [message]
