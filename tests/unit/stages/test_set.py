"""`$set` spec: the `$addFields` alias."""

from __future__ import annotations

import pytest

from pipeline_stages.add_fields import AddFieldsSpec
from pipeline_stages.set import KEY, OPERATOR_NAME, SetSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$set", "AddFieldsOperator")


def test_valid(parse_body) -> None:
    spec = parse_body(KEY, {"b": "$a", "a": 1})
    assert type(spec) is SetSpec
    assert isinstance(spec, AddFieldsSpec)
    assert list(spec.fields) == ["b", "a"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("x", [("dict_type", "")]),
        ({"$x": 1}, [("invalid_value", "/$x")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_message_names_the_stage(body_messages) -> None:
    assert body_messages(KEY, "x") == ['$set takes an object of field: expression, got "x"']
