"""`$addFields` spec: field path → raw expression."""

from __future__ import annotations

import pytest

from pipeline_stages.add_fields import KEY, OPERATOR_NAME, AddFieldsSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$addFields", "AddFieldsOperator")


def test_valid_keeps_order_and_number_types(parse_body) -> None:
    body = {"z": 1, "a.b": 2.0, "c": {"$divide": ["$x", 2]}, "d": [1, 1.5, None]}
    spec = parse_body(KEY, body)
    assert isinstance(spec, AddFieldsSpec)
    assert spec.fields == body
    assert list(spec.fields) == ["z", "a.b", "c", "d"]
    assert [type(v) for v in spec.fields["d"]] == [int, float, type(None)]


def test_empty_is_a_no_op(parse_body) -> None:
    assert parse_body(KEY, {}).fields == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (5, [("dict_type", "")]),
        ({"$a": 1}, [("invalid_value", "/$a")]),
        ({"": 1}, [("invalid_value", "/")]),
        ({"a.": 1}, [("invalid_value", "/a.")]),
        ({"a": 1, "a.b": 2}, [("invalid_combination", "/a.b")]),
        ({"a.b": 1, "a": 2}, [("invalid_combination", "/a")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
