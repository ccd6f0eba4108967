"""`$unset` spec: a field path or an array of them."""

from __future__ import annotations

import pytest

from pipeline_stages.unset import KEY, OPERATOR_NAME, UnsetSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$unset", "ProjectOperator")


@pytest.mark.parametrize(
    ("body", "fields"),
    [("a", ("a",)), (["a", "b.c"], ("a", "b.c")), ("_stream_meta", ("_stream_meta",))],
)
def test_valid(parse_body, body, fields) -> None:
    spec = parse_body(KEY, body)
    assert isinstance(spec, UnsetSpec)
    assert spec.fields == fields


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", [("invalid_value", "")]),
        ("$a", [("invalid_value", "")]),
        ([], [("string_type", "")]),
        (5, [("string_type", "")]),
        (["a", 5, "$b"], [("string_type", "/1"), ("invalid_value", "/2")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
