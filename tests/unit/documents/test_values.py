"""MQL values in Python: Extended JSON, types, BSON comparison, truthiness, paths."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest
from bson import Int64, ObjectId
from hypothesis import given
from hypothesis import strategies as st

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import (
    MISSING,
    compare,
    format_iso_date,
    get_path,
    mql_type,
    parse_iso_date,
    set_path,
    sort_key,
    to_datetime_ms,
    to_ejson,
    to_epoch_ms,
    truthy,
    unset_path,
    values_equal,
)

OID = "65a1b2c3d4e5f60718293a4b"


class TestExtendedJson:
    def test_date_round_trip_is_relaxed_iso_with_ms(self) -> None:
        value = from_ejson({"$date": "2024-01-01T12:00:00.123Z"})
        assert value == datetime(2024, 1, 1, 12, 0, 0, 123_000, tzinfo=UTC)
        assert to_ejson(value) == {"$date": "2024-01-01T12:00:00.123Z"}

    def test_date_is_truncated_to_milliseconds_and_normalised_to_utc(self) -> None:
        value = from_ejson({"$date": "2024-01-01T13:00:00.123999+01:00"})
        assert to_ejson(value) == {"$date": "2024-01-01T12:00:00.123Z"}

    def test_canonical_date_forms(self) -> None:
        assert from_ejson({"$date": {"$numberLong": "1000"}}) == to_datetime_ms(1000)
        assert from_ejson({"$date": -1}) == datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)

    def test_wrapped_numbers_and_object_id(self) -> None:
        decoded = from_ejson(
            {
                "l": {"$numberLong": "5"},
                "i": {"$numberInt": "7"},
                "d": {"$numberDouble": "-Infinity"},
                "n": {"$numberDecimal": "1.10"},
                "o": {"$oid": OID},
            }
        )
        assert decoded["l"] == 5 and mql_type(decoded["l"]) == "long"
        assert decoded["i"] == 7 and mql_type(decoded["i"]) == "int"
        assert decoded["d"] == -math.inf
        assert decoded["n"] == Decimal("1.10")
        assert decoded["o"] == ObjectId(OID)

    def test_encoding_is_strict_json(self) -> None:
        doc = {
            "a": math.nan,
            "b": [1, MISSING],
            "c": MISSING,
            "o": ObjectId(OID),
            "x": Decimal("2.5"),
        }
        encoded = to_ejson(doc)
        assert encoded == {
            "a": {"$numberDouble": "NaN"},
            "b": [1, None],
            "o": {"$oid": OID},
            "x": {"$numberDecimal": "2.5"},
        }
        json.dumps(encoded, allow_nan=False)

    def test_nested_documents_decode(self) -> None:
        assert from_ejson({"a": [{"$date": "1970-01-01T00:00:01Z"}]}) == {
            "a": [to_datetime_ms(1000)]
        }

    def test_int_and_double_stay_distinct(self) -> None:
        assert mql_type(to_ejson(3)) == "int" and mql_type(to_ejson(3.0)) == "double"

    def test_unknown_type_rejected(self) -> None:
        with pytest.raises(TypeError):
            to_ejson(object())


class TestDates:
    def test_epoch_conversions_before_1970(self) -> None:
        assert to_epoch_ms(datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC)) == -1

    def test_parse_offset_and_format(self) -> None:
        parsed = parse_iso_date("2024-08-12T21:41:01.788+00:00")
        assert format_iso_date(parsed) == "2024-08-12T21:41:01.788Z"
        tz = timezone(timedelta(hours=2))
        assert format_iso_date(datetime(2024, 1, 1, 2, tzinfo=tz)) == "2024-01-01T00:00:00.000Z"

    def test_bad_string(self) -> None:
        with pytest.raises(ValueError):
            parse_iso_date("not a date")


class TestTypes:
    @pytest.mark.parametrize(
        ("value", "name"),
        [
            (MISSING, "missing"),
            (None, "null"),
            (True, "bool"),
            (1, "int"),
            (2**31, "long"),
            (Int64(1), "long"),
            (1.5, "double"),
            (Decimal("1"), "decimal"),
            ("s", "string"),
            ({}, "object"),
            ([], "array"),
            (to_datetime_ms(0), "date"),
            (ObjectId(OID), "objectId"),
            (b"x", "binData"),
        ],
    )
    def test_mql_type(self, value: object, name: str) -> None:
        assert mql_type(value) == name

    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            (None, False),
            (MISSING, False),
            (False, False),
            (0, False),
            (0.0, False),
            (Decimal("0"), False),
            (math.nan, True),
            ("", True),
            ([], True),
            ({}, True),
            (-1, True),
        ],
    )
    def test_truthiness(self, value: object, expected: bool) -> None:
        assert truthy(value) is expected


class TestCompare:
    def test_numbers_compare_by_value_across_types(self) -> None:
        assert compare(1, 1.0) == 0 == compare(Decimal("1"), Int64(1))
        assert compare(1, 1.5) == -1
        assert compare(2**62, 1e10) == 1

    def test_nan_is_below_every_number_and_equal_to_itself(self) -> None:
        assert compare(math.nan, -math.inf) == -1
        assert compare(math.nan, math.nan) == 0

    def test_cross_type_order(self) -> None:
        ordered = [
            None,
            -5,
            "a",
            {"a": 1},
            [1],
            b"x",
            ObjectId(OID),
            False,
            True,
            to_datetime_ms(0),
        ]
        shuffled = [ordered[i] for i in (5, 2, 9, 0, 7, 1, 8, 3, 6, 4)]
        assert sorted(shuffled, key=sort_key) == ordered

    def test_null_equals_missing(self) -> None:
        assert compare(None, MISSING) == 0

    def test_objects_compare_field_by_field(self) -> None:
        assert compare({"a": 1, "b": 2}, {"a": 1, "c": 0}) == -1  # field name b < c
        assert compare({"a": 1}, {"a": 1, "b": 0}) == -1  # shorter first
        assert compare({"a": "x"}, {"a": 5}) == 1  # field type: string > number

    def test_arrays_compare_element_by_element(self) -> None:
        assert compare([1, 2], [1, 3]) == -1
        assert compare([1], [1, 0]) == -1
        assert compare([2], [1, 9]) == 1

    def test_strings_are_binary_ordered(self) -> None:
        assert compare("B", "a") == -1
        assert compare("é", "z") == 1

    def test_equality_and_hashable_keys(self) -> None:
        assert values_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
        assert len({sort_key(1), sort_key(1.0), sort_key(Decimal("1.0"))}) == 1


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.integers(-(10**12), 10**12).map(to_datetime_ms),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(_values, _values, _values)
def test_compare_is_a_total_order(a: object, b: object, c: object) -> None:
    assert compare(a, a) == 0
    assert compare(a, b) == -compare(b, a)
    if compare(a, b) <= 0 and compare(b, c) <= 0:
        assert compare(a, c) <= 0


@given(_values)
def test_ejson_round_trip(value: object) -> None:
    text = json.dumps(to_ejson(value), allow_nan=False)
    assert values_equal(from_ejson(json.loads(text)), value)


class TestPaths:
    def test_get_dotted_path(self) -> None:
        assert get_path({"a": {"b": 1}}, "a.b") == 1
        assert get_path({"a": {"b": 1}}, "a.c") is MISSING
        assert get_path({"a": 5}, "a.b") is MISSING

    def test_get_through_arrays(self) -> None:
        assert get_path({"a": [{"b": 1}, {"c": 2}, {"b": 3}]}, "a.b") == [1, 3]

    def test_set_and_unset(self) -> None:
        doc: dict[str, object] = {"a": 1}
        set_path(doc, "b.c", 2)
        set_path(doc, "a.x", 3)
        assert doc == {"a": {"x": 3}, "b": {"c": 2}}
        unset_path(doc, "b.c")
        unset_path(doc, "nope.deeper")
        assert doc == {"a": {"x": 3}, "b": {}}
        set_path(doc, "a", MISSING)
        assert doc == {"b": {}}
