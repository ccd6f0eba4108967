"""`validator_rules`: a validator split into the rules a DLQ record names, without Spark."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages._mql.query.rules import validator_rules
from pipeline_stages._stream.batch import DETAILS_MARK, err_info


def names(validator: Any) -> list[tuple[str, bool]]:
    return [(r.details["operatorName"], r.schema) for r in validator_rules(validator)]


@pytest.mark.parametrize(
    ("validator", "expected"),
    [
        ({"a": 1}, [("$eq", False)]),
        ({"a": {"$gt": 1, "$lt": 5}}, [("$gt", False), ("$lt", False)]),
        ({"a": {"$regex": "x", "$options": "i"}}, [("$regex", False)]),
        ({"$or": [{"a": 1}], "$comment": "c"}, [("$or", False)]),
        ({"a": {"$date": "2024-01-01T00:00:00Z"}}, [("$eq", False)]),  # a literal
        (
            {"$jsonSchema": {"required": ["a"], "properties": {"a": {}, "b": {}}, "title": "t"}},
            [("required", True), ("properties", True), ("properties", True)],
        ),
        (
            {"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": False}},
            [("additionalProperties", True)],
        ),
        ({"$jsonSchema": {"minimum": 1, "exclusiveMinimum": True}}, [("exclusiveMinimum", True)]),
        ({"$jsonSchema": {"minimum": 1}}, [("minimum", True)]),
        ([1], []),
        ({"$jsonSchema": 5}, []),
    ],
)
def test_rules(validator: Any, expected: list[tuple[str, bool]]) -> None:
    assert names(validator) == expected


def test_each_rule_filters_on_its_own_and_says_how_it_was_specified() -> None:
    [regex] = validator_rules({"a": {"$regex": "x", "$options": "i"}})
    assert regex.filter == {"a": {"$regex": "x", "$options": "i"}}
    assert regex.details == {"operatorName": "$regex", "specifiedAs": regex.filter}
    [_, b] = validator_rules({"$jsonSchema": {"properties": {"a": {}, "b": {"minimum": 0}}}})
    assert b.filter == {"$jsonSchema": {"properties": {"b": {"minimum": 0}}}}
    assert b.details["propertyName"] == "b"
    grouped = validator_rules({"$jsonSchema": {"additionalProperties": False, "properties": {}}})
    assert grouped[0].filter == {"$jsonSchema": {"additionalProperties": False, "properties": {}}}


def test_err_info_splits_details_from_the_reason() -> None:
    assert err_info("plain") == {"reason": "plain"}
    assert err_info(f"r{DETAILS_MARK}" + '{"a": 1}') == {"reason": "r", "details": {"a": 1}}
    broken = f"r{DETAILS_MARK}not json"
    assert err_info(broken) == {"reason": broken}
