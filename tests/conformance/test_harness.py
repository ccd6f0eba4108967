"""The transcript matcher itself: partial where listed, strict everywhere else."""

from __future__ import annotations

import math

import pytest

from pipeline_stages._documents.ejson import from_ejson
from tests.conformance.harness import match_outputs, mismatches, parse_duration


def test_partial_match_on_listed_fields_only() -> None:
    assert mismatches({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 2, "d": 3}, "e": 4}) == []


def test_listed_field_must_be_present_and_equal() -> None:
    assert mismatches({"a": 1}, {"b": 1}) == ["a: missing"]
    assert mismatches({"a": 1}, {"a": 2}) == ["a: expected 1, got 2"]


def test_exists_false_asserts_absence() -> None:
    assert mismatches({"a": {"$exists": False}}, {"b": 1}) == []
    assert mismatches({"a": {"$exists": False}}, {"a": None}) != []


def test_numeric_family_is_strict_but_long_equals_int() -> None:
    assert mismatches(2.0, 2) != []
    assert mismatches(2, from_ejson({"$numberLong": "2"})) == []
    assert mismatches(math.nan, math.nan) == []
    assert mismatches(True, 1) != []


def test_arrays_are_exact_length_and_elementwise_partial() -> None:
    assert mismatches([{"a": 1}], [{"a": 1, "b": 2}]) == []
    assert mismatches([1], [1, 2]) != []


def test_dates_compare_as_dates() -> None:
    expected = from_ejson({"$date": "2024-01-01T00:00:00Z"})
    actual = from_ejson({"$date": "2024-01-01T00:00:00.000Z"})
    assert mismatches(expected, actual) == []


def test_unordered_matching_needs_a_perfect_assignment() -> None:
    expected = [{"a": 1}, {}]
    assert match_outputs(expected, [{"a": 2}, {"a": 1}], ordered=False) == []
    assert match_outputs(expected, [{"a": 1}, {"a": 1}], ordered=False) == []
    assert match_outputs([{"a": 1}, {"a": 1}], [{"a": 1}, {"a": 2}], ordered=False) != []
    assert match_outputs([{"a": 1}], [{"a": 1}, {"a": 1}], ordered=False) != []


def test_ordered_matching() -> None:
    assert match_outputs([{"a": 1}, {"a": 2}], [{"a": 2}, {"a": 1}], ordered=True) != []
    assert match_outputs([{"a": 2}, {"a": 1}], [{"a": 2}, {"a": 1}], ordered=True) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1 minute", 60_000),
        ("90s", 90_000),
        ("500ms", 500),
        ({"size": 2, "unit": "hour"}, 7_200_000),
        (7, 7),
    ],
)
def test_parse_duration(text: object, expected: int) -> None:
    assert parse_duration(text) == expected


def test_parse_duration_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")
