"""Query operands classified at compile time (no Spark needed)."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages._mql.query.literals import (
    BadLiteral,
    Regex,
    date_millis,
    is_ejson,
    make_regex,
    parse_literal,
)

JAN_1_2024_MS = 1_704_067_200_000


@pytest.mark.parametrize(
    "value,kind,parsed",
    [
        (None, "null", None),
        (True, "bool", True),
        (3, "number", 3),
        (2.5, "number", 2.5),
        ("x", "string", "x"),
        ([1, {"b": 2}], "array", '[1, {"b": 2}]'),
        ({"b": 1}, "object", '{"b": 1}'),
        ({"$date": "2024-01-01T00:00:00Z"}, "date", JAN_1_2024_MS),
        ({"$date": "2024-01-01T01:00:00+01:00"}, "date", JAN_1_2024_MS),
        ({"$date": "2024-01-01T00:00:00"}, "date", JAN_1_2024_MS),
        ({"$date": JAN_1_2024_MS}, "date", JAN_1_2024_MS),
        ({"$date": {"$numberLong": str(JAN_1_2024_MS)}}, "date", JAN_1_2024_MS),
        ({"$oid": "65A1B2C3D4E5F60718293A4B"}, "objectId", "65a1b2c3d4e5f60718293a4b"),
        ({"$numberLong": "9007199254740993"}, "number", 9007199254740993),
        ({"$numberInt": "7"}, "number", 7),
        ({"$numberDouble": "1.5"}, "number", 1.5),
        ({"$numberDecimal": "2"}, "number", 2),
        ({"$regularExpression": {"pattern": "^a", "options": "i"}}, "regex", Regex("^a", "i")),
    ],
)
def test_operands_are_classified(value: Any, kind: str, parsed: Any) -> None:
    literal = parse_literal(value)
    assert (literal.kind, literal.value) == (kind, parsed)


def test_nested_dates_are_normalised_to_the_document_encoding() -> None:
    literal = parse_literal({"at": {"$date": JAN_1_2024_MS + 5}})
    assert literal.value == '{"at": {"$date": "2024-01-01T00:00:00.005Z"}}'


@pytest.mark.parametrize(
    "value",
    [
        {"$date": "yesterday"},
        {"$date": True},
        {"$oid": "xyz"},
        {"$numberLong": 5},
        {"$numberLong": "five"},
        {"$regularExpression": "^a"},
    ],
)
def test_malformed_extended_json_is_rejected(value: Any) -> None:
    with pytest.raises(BadLiteral):
        parse_literal(value)


def test_only_single_key_wrappers_are_extended_json() -> None:
    assert is_ejson({"$date": 0})
    assert not is_ejson({"$date": 0, "x": 1})
    assert not is_ejson({"$gt": 1})
    assert date_millis("1970-01-01T00:00:01.5Z") == 1500


@pytest.mark.parametrize(
    "options,java",
    [("", "a"), ("i", "(?iu)a"), ("ms", "(?ms)a"), ("x", "(?x)a"), ("u", "a"), ("si", "(?ius)a")],
)
def test_regex_options_become_java_flags(options: str, java: str) -> None:
    assert make_regex("a", options).java == java


@pytest.mark.parametrize(
    "pattern,options,message",
    [
        ("a", "q", "invalid flag in regex options: q"),
        (5, "", "$regex has to be a string"),
        ("a", 5, "$options has to be a string"),
        ("(", "", "Regular expression is invalid"),
        ("a\0", "", "embedded null byte"),
    ],
)
def test_bad_regexes_are_rejected(pattern: Any, options: Any, message: str) -> None:
    with pytest.raises(BadLiteral, match=message.replace("$", r"\$").replace("(", r"\(")):
        make_regex(pattern, options)
