"""`$validate` spec: validator + validationAction."""

from __future__ import annotations

import pytest

from pipeline_stages.validate import KEY, OPERATOR_NAME, ValidateSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$validate", "ValidateOperator")


def test_defaults(parse_body) -> None:
    spec = parse_body(KEY, {"validator": {"$jsonSchema": {"required": ["a"]}}})
    assert isinstance(spec, ValidateSpec)
    assert spec.validation_action == "discard"
    assert spec.validator == {"$jsonSchema": {"required": ["a"]}}


def test_alias(parse_body) -> None:
    spec = parse_body(KEY, {"validator": {"$expr": {"$gt": ["$a", 1]}}, "validationAction": "dlq"})
    assert spec.validation_action == "dlq"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("missing", "/validator")]),
        ({"validator": 5}, [("dict_type", "/validator")]),
        ({"validator": {"$where": "1"}}, [("unsupported_option", "/validator/$where")]),
        ({"validator": {}, "validationAction": "fail"}, [("literal_error", "/validationAction")]),
        (
            {"validator": {}, "validation_action": "dlq"},
            [("extra_forbidden", "/validation_action")],
        ),
        ({"validator": {}, "onError": "dlq"}, [("extra_forbidden", "/onError")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_pydantic_messages_say_what_was_received(body_messages) -> None:
    assert body_messages(KEY, {"validator": {}, "validationAction": "fail"}) == [
        "Input should be 'discard' or 'dlq', got \"fail\""
    ]
    assert body_messages(KEY, {}) == ["Required field 'validator' is missing"]
