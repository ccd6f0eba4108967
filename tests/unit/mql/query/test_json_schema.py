"""`$jsonSchema` in query filters: the draft-4 subset MongoDB supports, and its problems.

Expected values follow JSON Schema draft 4 as MongoDB documents it: keywords constrain only
values of their own type, absent properties satisfy `properties`, `type: "object"` means a
document (a date is not one), and `enum` compares whole values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from .test_harness import Row, evaluate, key, problems_of, row_id

DATE = {"$date": "2024-01-01T00:00:00.000Z"}
OID = {"$oid": "65a1b2c3d4e5f60718293a4b"}
STREAM_DOC = {"a": 1, "_ts": DATE, "_stream_meta": {"source": {"type": "kafka"}}}


def prop(schema: dict[str, Any]) -> dict[str, Any]:
    """A filter applying `schema` to field `a`."""
    return {"$jsonSchema": {"properties": {"a": schema}}}


TYPES: list[Row] = [
    ({"$jsonSchema": {"type": "object"}}, {"a": 1}, True),
    ({"$jsonSchema": {"required": ["a"]}}, {"a": None}, True),
    ({"$jsonSchema": {"required": ["a"]}}, {}, False),
    ({"$jsonSchema": {"required": ["a", "b"]}}, {"a": 1}, False),
    (prop({"bsonType": "int"}), {"a": 1}, True),
    (prop({"bsonType": "int"}), {"a": "x"}, False),
    (prop({"bsonType": "int"}), {}, True),
    (prop({"bsonType": "int"}), {"a": 3000000000}, False),
    (prop({"bsonType": "int"}), {"a": 1.5}, False),
    (prop({"bsonType": ["int", "long"]}), {"a": 3000000000}, True),
    (prop({"bsonType": "long"}), {"a": 3000000000}, True),
    (prop({"bsonType": "number"}), {"a": 1.5}, True),
    (prop({"bsonType": "number"}), {"a": "1"}, False),
    (prop({"bsonType": "double"}), {"a": 1.5}, True),
    (prop({"bsonType": "double"}), {"a": 1}, False),
    (prop({"bsonType": "decimal"}), {"a": {"$numberDecimal": "1.5"}}, True),
    (prop({"bsonType": "string"}), {"a": "x"}, True),
    (prop({"bsonType": "bool"}), {"a": False}, True),
    (prop({"bsonType": "null"}), {"a": None}, True),
    (prop({"bsonType": "date"}), {"a": DATE}, True),
    (prop({"bsonType": "date"}), {"a": "2024-01-01"}, False),
    (prop({"bsonType": "objectId"}), {"a": OID}, True),
    (prop({"bsonType": "object"}), {"a": {"b": 1}}, True),
    (prop({"bsonType": "object"}), {"a": DATE}, False),
    (prop({"bsonType": "array"}), {"a": [1]}, True),
    (prop({"bsonType": "array"}), {"a": 1}, False),
    (prop({"type": "number"}), {"a": 1}, True),
    (prop({"type": "number"}), {"a": 2.5}, True),
    (prop({"type": "number"}), {"a": {"$numberLong": "1"}}, True),
    (prop({"type": "number"}), {"a": "1"}, False),
    (prop({"type": ["string", "null"]}), {"a": None}, True),
    (prop({"type": ["string", "null"]}), {"a": "x"}, True),
    (prop({"type": ["string", "null"]}), {"a": 1}, False),
    (prop({"type": "boolean"}), {"a": True}, True),
    (prop({"type": "boolean"}), {"a": 0}, False),
    (prop({"type": "array"}), {"a": []}, True),
    (prop({"type": "object"}), {"a": {}}, True),
    (prop({"type": "object"}), {"a": DATE}, False),
    (prop({"type": "object"}), {"a": [{}]}, False),
    (prop({"type": "string", "title": "A", "description": "any text"}), {"a": "x"}, True),
]

VALUES: list[Row] = [
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": 1.0}, True),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": "x"}, True),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": [1, 2]}, True),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": {"b": 1}}, True),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": None}, True),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": 2}, False),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": "1"}, False),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": [1]}, False),
    (prop({"enum": [1, "x", [1, 2], {"b": 1}, None]}), {"a": [[1, 2]]}, False),
    (prop({"enum": [1, "x"]}), {"a": [1]}, False),
    (prop({"minimum": 5}), {"a": 5}, True),
    (prop({"minimum": 5}), {"a": 4}, False),
    (prop({"minimum": 5}), {"a": 4.99}, False),
    (prop({"minimum": 5}), {"a": "x"}, True),
    (prop({"minimum": 5}), {}, True),
    (prop({"minimum": 5, "exclusiveMinimum": True}), {"a": 5}, False),
    (prop({"minimum": 5, "exclusiveMinimum": True}), {"a": 5.5}, True),
    (prop({"minimum": 5, "exclusiveMinimum": False}), {"a": 5}, True),
    (prop({"maximum": 10}), {"a": 10}, True),
    (prop({"maximum": 10}), {"a": 11}, False),
    (prop({"maximum": 10, "exclusiveMaximum": True}), {"a": 10}, False),
    (prop({"maximum": 10, "exclusiveMaximum": True}), {"a": 9}, True),
    (prop({"minLength": 2, "maxLength": 3}), {"a": "ab"}, True),
    (prop({"minLength": 2, "maxLength": 3}), {"a": "a"}, False),
    (prop({"minLength": 2, "maxLength": 3}), {"a": "abcd"}, False),
    (prop({"minLength": 2, "maxLength": 3}), {"a": "日本"}, True),
    (prop({"minLength": 2, "maxLength": 3}), {"a": 'a"b'}, True),
    (prop({"minLength": 2, "maxLength": 3}), {"a": 12345}, True),
    (prop({"pattern": "^a"}), {"a": "abc"}, True),
    (prop({"pattern": "^a"}), {"a": "bac"}, False),
    (prop({"pattern": "^a"}), {"a": 1}, True),
    (prop({"pattern": "b"}), {"a": "abc"}, True),
]

STRUCTURE: list[Row] = [
    (prop({"items": {"bsonType": "int"}}), {"a": [1, 2]}, True),
    (prop({"items": {"bsonType": "int"}}), {"a": [1, "x"]}, False),
    (prop({"items": {"bsonType": "int"}}), {"a": []}, True),
    (prop({"items": {"bsonType": "int"}}), {"a": 5}, True),
    (
        prop({"items": {"required": ["b"], "properties": {"b": {"minimum": 0}}}}),
        {"a": [{"b": 1}, {"b": 2}]},
        True,
    ),
    (
        prop({"items": {"required": ["b"], "properties": {"b": {"minimum": 0}}}}),
        {"a": [{"b": 1}, {"c": 2}]},
        False,
    ),
    (
        prop({"items": {"required": ["b"], "properties": {"b": {"minimum": 0}}}}),
        {"a": [{"b": -1}]},
        False,
    ),
    (prop({"items": {"items": {"enum": ["x"]}}}), {"a": [["x"], ["x", "x"]]}, True),
    (prop({"items": {"items": {"enum": ["x"]}}}), {"a": [["x"], ["y"]]}, False),
    (prop({"minItems": 1, "maxItems": 2}), {"a": []}, False),
    (prop({"minItems": 1, "maxItems": 2}), {"a": [1]}, True),
    (prop({"minItems": 1, "maxItems": 2}), {"a": [1, 2, 3]}, False),
    (prop({"minItems": 1, "maxItems": 2}), {"a": "xyz"}, True),
    ({"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": False}}, {"a": 1}, True),
    (
        {"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": False}},
        {"a": 1, "b": 2},
        False,
    ),
    ({"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": False}}, {}, True),
    ({"$jsonSchema": {"additionalProperties": False}}, {}, True),
    ({"$jsonSchema": {"additionalProperties": False}}, {"a": 1}, False),
    ({"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": False}}, STREAM_DOC, False),
    (
        {
            "$jsonSchema": {
                "properties": {"a": {}, "_ts": {"bsonType": "date"}, "_stream_meta": {}},
                "additionalProperties": False,
            }
        },
        STREAM_DOC,
        True,
    ),
    (
        {"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": {"bsonType": "string"}}},
        {"a": 1, "b": "x"},
        True,
    ),
    (
        {"$jsonSchema": {"properties": {"a": {}}, "additionalProperties": {"bsonType": "string"}}},
        {"a": 1, "b": 2},
        False,
    ),
    (prop({"additionalProperties": False}), {"a": 5}, True),
    (prop({"additionalProperties": False}), {"a": {"x": 1}}, False),
]

NESTED = prop(
    {
        "bsonType": "object",
        "required": ["b"],
        "properties": {"b": {"bsonType": "object", "properties": {"c": {"enum": [1]}}}},
    }
)
COMBINED: list[Row] = [
    (NESTED, {"a": {"b": {"c": 1}}}, True),
    (NESTED, {"a": {"b": {"c": 2}}}, False),
    (NESTED, {"a": {"b": {}}}, True),
    (NESTED, {"a": {}}, False),
    (NESTED, {"a": 5}, False),
    (NESTED, {}, True),
    ({"$jsonSchema": {"required": ["a"]}, "a": {"$gt": 1}}, {"a": 2}, True),
    ({"$jsonSchema": {"required": ["a"]}, "a": {"$gt": 1}}, {"a": 1}, False),
    ({"$or": [{"$jsonSchema": {"required": ["a"]}}, {"b": 1}]}, {"b": 1}, True),
    ({"$nor": [{"$jsonSchema": {"required": ["a"]}}]}, {"b": 1}, True),
]

ROWS = TYPES + VALUES + STRUCTURE + COMBINED


@pytest.fixture(scope="module")
def results(spark: Any) -> dict[tuple[str, str], bool]:
    """Every row of this module, evaluated in a few Spark jobs."""
    return evaluate(spark, ROWS)


@pytest.mark.spark
@pytest.mark.parametrize("row", ROWS, ids=row_id)
def test_json_schema_validates_like_mongodb(row: Row, results: dict[tuple[str, str], bool]) -> None:
    filter_, doc, expected = row
    assert results[(key(filter_), key(doc))] is expected


S = "/pipeline/1/$match/$jsonSchema"
INVALID: list[tuple[Any, str, str]] = [
    ({"type": "integer"}, "unsupported_option", f"{S}/type"),
    ({"allOf": [{}]}, "unsupported_option", f"{S}/allOf"),
    ({"foo": 1}, "unsupported_option", f"{S}/foo"),
    ({"properties": {"a": {"format": "email"}}}, "unsupported_option", f"{S}/properties/a/format"),
    ({"properties": {"a": {"items": [{}]}}}, "unsupported_option", f"{S}/properties/a/items"),
    ({"type": "strin"}, "invalid_arguments", f"{S}/type"),
    ({"type": 5}, "invalid_arguments", f"{S}/type"),
    ({"bsonType": "integer"}, "invalid_arguments", f"{S}/bsonType"),
    ({"type": "string", "bsonType": "string"}, "invalid_arguments", S),
    ({"required": []}, "invalid_arguments", f"{S}/required"),
    ({"required": ["a", "a"]}, "invalid_arguments", f"{S}/required"),
    ({"enum": []}, "invalid_arguments", f"{S}/enum"),
    ({"minimum": "5"}, "invalid_arguments", f"{S}/minimum"),
    ({"exclusiveMinimum": True}, "invalid_arguments", f"{S}/exclusiveMinimum"),
    ({"maximum": 1, "exclusiveMaximum": 1}, "invalid_arguments", f"{S}/exclusiveMaximum"),
    ({"minLength": -1}, "invalid_arguments", f"{S}/minLength"),
    ({"maxItems": 1.5}, "invalid_arguments", f"{S}/maxItems"),
    ({"pattern": "("}, "invalid_arguments", f"{S}/pattern"),
    ({"additionalProperties": 5}, "invalid_arguments", f"{S}/additionalProperties"),
    ({"properties": 5}, "invalid_arguments", f"{S}/properties"),
    ({"properties": {"a": 5}}, "invalid_arguments", f"{S}/properties/a"),
    ({"items": {"minimum": "x"}}, "invalid_arguments", f"{S}/items/minimum"),
]


@pytest.mark.spark
@pytest.mark.parametrize("schema,code,path", INVALID, ids=[json.dumps(r[0]) for r in INVALID])
def test_invalid_schema_reports_code_and_path(
    spark: Any, schema: Any, code: str, path: str
) -> None:
    assert problems_of({"$jsonSchema": schema}) == [(code, path)]
