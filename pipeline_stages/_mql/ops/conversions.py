"""The `$convert` conversion table: one function per target type.

Each conversion takes the operand and returns `(value, failure)`: the converted VARIANT and
MongoDB's failure message (NULL when the conversion succeeds); `$convert` routes failures to
`onError`. See `ops_types.py` for the supported targets and parsing rules.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    kind_text,
    when_all,
)
from pipeline_stages._mql.ops.dates import parse_date_string, parse_error
from pipeline_stages._mql.ops.messages import double_text, message, number_text

_INT_TEXT = r"^[+-]?[0-9]+$"
_FLOAT_TEXT = (
    r"^[+-]?(([0-9]+\.?[0-9]*)|(\.[0-9]+))([eE][+-]?[0-9]+)?$|^[+-]?(?i:inf|infinity|nan)$"
)
_OID_TEXT = r"^[0-9a-fA-F]{24}$"


def _unsupported(a: Arg, target: str) -> Column:
    return message(
        "Unsupported conversion from ",
        kind_text(a),
        f" to {target} in $convert with no onError value",
    )


def _parse_failure(text: Column, reason: Column | str) -> Column:
    return message(
        "Failed to parse number '", text, "' in $convert with no onError value: ", reason
    )


def _string_number_error(text: Column, pattern: str) -> Column:
    return when_all(
        [
            (
                F.startswith(text, F.lit("0x")) | F.startswith(text, F.lit("0X")),
                message("Illegal hexadecimal input in $convert with no onError value: ", text),
            ),
            (text == "", _parse_failure(text, "No digits")),
            (
                ~F.regexp_like(text, F.lit(pattern)),
                _parse_failure(text, "Did not consume whole string."),
            ),
        ]
    )


def _overflow(value: Column) -> Column:
    return message(
        "Conversion would overflow target type in $convert with no onError value: ", value
    )


def _double_to_integer_error(x: Column, low: float, high: float) -> Column:
    return when_all(
        [
            (
                F.isnan(x),
                F.lit(
                    "Attempt to convert NaN value to integer type in $convert with no onError value"
                ),
            ),
            (
                F.abs(x) == float("inf"),
                F.lit(
                    "Attempt to convert infinity value to integer type in $convert with no onError value"
                ),
            ),
            ((x < low) | (x >= high), _overflow(number_text(x))),
        ]
    )


def _to_integer(a: Arg, bits: int) -> tuple[Column, Column]:
    """(value as BIGINT, failure) converting to int (32) or long (64)."""
    low, high = -(2.0 ** (bits - 1)), 2.0 ** (bits - 1)
    text = V.as_string(a.value, a.k)
    x = V.as_double(a.value, a.k)
    as_long = V.as_long(a.value, a.k)
    parsed = text.try_cast("bigint")
    value = when_all(
        [
            (a.kind_in(K.INTEGRAL_TYPES), as_long),
            (a.kind_in(("double", "decimal")), x.try_cast("bigint")),
            (a.kind_in(("string",)), parsed),
            (a.kind_in(("bool",)), V.as_bool(a.value, "bool").cast("bigint")),
            (a.kind_in(("date",)) & F.lit(bits == 64), V.as_epoch_ms(a.value, "date")),
        ]
    )
    int_range = (value < K.INT32_MIN) | (value > K.INT32_MAX)
    failure = when_all(
        [
            (a.kind_in(K.INTEGRAL_TYPES) & F.lit(bits == 32) & int_range, _overflow(F.lit(""))),
            (a.kind_in(("double", "decimal")), _double_to_integer_error(x, low, high)),
            (
                a.kind_in(("string",)),
                F.coalesce(
                    _string_number_error(text, _INT_TEXT),
                    F.when(
                        parsed.isNull() | (F.lit(bits == 32) & int_range),
                        _parse_failure(text, "Overflow"),
                    ),
                ),
            ),
            (
                ~a.kind_in(
                    (
                        "int",
                        "long",
                        "double",
                        "decimal",
                        "string",
                        "bool",
                        *(["date"] if bits == 64 else []),
                    )
                ),
                _unsupported(a, "int" if bits == 32 else "long"),
            ),
        ]
    )
    return value, failure


def _to_double(a: Arg) -> tuple[Column, Column]:
    text = V.as_string(a.value, a.k)
    parsed = text.try_cast("double")
    value = when_all(
        [
            (a.kind_in(K.NUMERIC_TYPES), V.as_double(a.value, a.k)),
            (a.kind_in(("string",)), parsed),
            (a.kind_in(("bool",)), V.as_bool(a.value, "bool").cast("double")),
            (a.kind_in(("date",)), V.as_epoch_ms(a.value, "date").cast("double")),
        ]
    )
    failure = when_all(
        [
            (
                a.kind_in(("string",)),
                F.coalesce(
                    _string_number_error(text, _FLOAT_TEXT),
                    F.when(parsed.isNull(), _parse_failure(text, "Out of range")),
                ),
            ),
            (
                ~a.kind_in(("int", "long", "double", "decimal", "string", "bool", "date")),
                _unsupported(a, "double"),
            ),
        ]
    )
    return V.from_double(value), failure


def _decimal_object(text: Column) -> Column:
    return F.when(
        text.isNotNull(), F.to_variant_object(F.named_struct(F.lit("$numberDecimal"), text))
    )


def _to_decimal(a: Arg) -> tuple[Column, Column]:
    text = V.as_string(a.value, a.k)
    wrapped = F.try_variant_get(a.value, '$["$numberDecimal"]', "string")
    digits = when_all(
        [
            (a.kind_in(K.INTEGRAL_TYPES), V.as_long(a.value, a.k).cast("string")),
            (a.kind_in(("decimal",)), wrapped),
            (a.kind_in(("double",)), double_text(V.as_double(a.value, a.k))),
            (a.kind_in(("string",)), text),
            (
                a.kind_in(("bool",)),
                F.when(V.as_bool(a.value, "bool"), F.lit("1")).otherwise(F.lit("0")),
            ),
            (a.kind_in(("date",)), V.as_epoch_ms(a.value, "date").cast("string")),
        ]
    )
    failure = when_all(
        [
            (a.kind_in(("string",)), _string_number_error(text, _FLOAT_TEXT)),
            (
                ~a.kind_in(("int", "long", "double", "decimal", "string", "bool", "date")),
                _unsupported(a, "decimal"),
            ),
        ]
    )
    return _decimal_object(digits), failure


def _to_string(a: Arg) -> tuple[Column, Column]:
    oid = F.try_variant_get(a.value, '$["$oid"]', "string")
    text = when_all(
        [
            (a.kind_in(("string",)), V.as_string(a.value, "string")),
            (a.kind_in(K.INTEGRAL_TYPES), V.as_long(a.value, a.k).cast("string")),
            (a.kind_in(("double",)), double_text(V.as_double(a.value, a.k))),
            (a.kind_in(("decimal",)), F.try_variant_get(a.value, '$["$numberDecimal"]', "string")),
            (
                a.kind_in(("bool",)),
                F.when(V.as_bool(a.value, "bool"), F.lit("true")).otherwise(F.lit("false")),
            ),
            (a.kind_in(("date",)), F.date_format(V.as_timestamp(a.value, "date"), V.DATE_PATTERN)),
            (a.kind_in(("objectId",)), oid),
            (a.kind_in(("object", "array")), F.to_json(a.value)),
        ]
    )
    supported = (
        "string",
        "int",
        "long",
        "double",
        "decimal",
        "bool",
        "date",
        "objectId",
        "object",
        "array",
    )
    failure = F.when(~a.kind_in(supported), _unsupported(a, "string"))
    return V.from_string(text), failure


def _to_bool(a: Arg) -> tuple[Column, Column]:
    value = when_all(
        [
            (a.kind_in(("bool",)), V.as_bool(a.value, "bool")),
            (a.kind_in(K.NUMERIC_TYPES), V.as_double(a.value, a.k) != 0),
        ],
        F.lit(True),
    )
    return V.from_bool(value), F.lit(None).cast("string")


#: `$toDate` of a number of milliseconds beyond Sluice's date range.
DATE_OVERFLOW = "date overflow: the date is outside the years 1 to 9999"


def _to_date(a: Arg, bind: Callable[[Column], Column]) -> tuple[Column, Column]:
    text = V.as_string(a.value, a.k)
    x = V.as_double(a.value, a.k)
    oid_seconds = F.conv(
        F.substr(F.try_variant_get(a.value, '$["$oid"]', "string"), F.lit(1), F.lit(8)), 16, 10
    ).try_cast("bigint")
    parsed = bind(parse_date_string(text))
    from_number = bind(V.timestamp_from_ms(x.try_cast("bigint")))
    value = when_all(
        [
            (a.kind_in(("date",)), V.as_timestamp(a.value, "date")),
            (a.kind_in(("long", "double", "decimal")), from_number),
            (a.kind_in(("string",)), parsed),
            (a.kind_in(("objectId",)), F.timestamp_seconds(oid_seconds)),
        ]
    )
    failure = when_all(
        [
            (
                a.kind_in(("double", "decimal")),
                F.coalesce(
                    _double_to_integer_error(x, -(2.0**63), 2.0**63),
                    F.when(x.isNotNull() & from_number.isNull(), F.lit(DATE_OVERFLOW)),
                ),
            ),
            (a.kind_in(("long",)) & from_number.isNull(), F.lit(DATE_OVERFLOW)),
            (a.kind_in(("string",)) & parsed.isNull(), parse_error(text)),
            (
                ~a.kind_in(("date", "long", "double", "decimal", "string", "objectId")),
                _unsupported(a, "date"),
            ),
        ]
    )
    return V.from_timestamp(value), failure


def _to_object_id(a: Arg) -> tuple[Column, Column]:
    text = V.as_string(a.value, a.k)
    value = F.when(a.kind_in(("objectId",)), a.value).otherwise(
        F.to_variant_object(F.named_struct(F.lit("$oid"), F.lower(text)))
    )
    failure = when_all(
        [
            (a.kind_in(("objectId",)), F.lit(None).cast("string")),
            (
                a.kind_in(("string",)) & (F.length(text) != 24),
                message(
                    "Failed to parse objectId '",
                    text,
                    "' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found ",
                    F.length(text).cast("string"),
                ),
            ),
            (
                a.kind_in(("string",)) & ~F.regexp_like(text, F.lit(_OID_TEXT)),
                message(
                    "Failed to parse objectId '",
                    text,
                    "' in $convert with no onError value: Invalid character found in hex string: ",
                    text,
                ),
            ),
            (~a.kind_in(("string",)), _unsupported(a, "objectId")),
        ]
    )
    return value, failure


def _convert_int(bits: int) -> Callable[[Arg], tuple[Column, Column]]:
    def convert(a: Arg) -> tuple[Column, Column]:
        value, failure = _to_integer(a, bits)
        return V.from_long(value), failure

    return convert


CONVERSIONS: dict[str, Callable[[Arg], tuple[Column, Column]]] = {
    "double": _to_double,
    "string": _to_string,
    "objectId": _to_object_id,
    "bool": _to_bool,
    "int": _convert_int(32),
    "long": _convert_int(64),
    "decimal": _to_decimal,
}
RESULT_KINDS = {"int": {"int"}, "long": {"int", "long"}}
