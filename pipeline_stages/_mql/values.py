"""How MQL values live in Spark: one VARIANT column per value, typed at run time.

Documents are schemaless, so every MQL value is carried as a Spark `VARIANT` column and its
MQL type is read from the value itself. The encoding is:

| MQL                | in the VARIANT                                                     |
|--------------------|--------------------------------------------------------------------|
| missing            | SQL NULL (the column itself is NULL)                               |
| null               | a variant null (`is_variant_null`)                                 |
| int / long         | any variant integer (`BIGINT` in `schema_of_variant`); `int` when it fits in 32 bits, or `{"$numberLong": "..."}` |
| double             | variant `DOUBLE`, or `DECIMAL` (Spark's `parse_json` turns `1.5` into a decimal) |
| decimal            | `{"$numberDecimal": "<text>"}` (VARIANT has no decimal128)         |
| string, bool       | variant `STRING`, `BOOLEAN`                                        |
| object, array      | variant `OBJECT<…>`, `ARRAY<…>` (object keys come back sorted by name) |
| date               | the relaxed Extended JSON object `{"$date": "<yyyy-MM-ddTHH:mm:ss.SSSZ>"}` |
| objectId           | `{"$oid": "<24 hex>"}`                                             |

Dates are Extended JSON objects rather than variant timestamps because `to_json` renders a
variant timestamp as a plain string: with the EJSON form, serialising a document natively
yields exactly the relaxed Extended JSON that `sluice process` and the sinks print.

A value's MQL type tag (`kind_of`, and the checks that take a precomputed tag) lives in
`kinds.py`; the conversions here take the same optional `kind`.

Every function here builds Spark `Column`s and never raises at run time: Spark 4 runs with ANSI
mode, where a failing cast fails the whole query, so only `try_*` conversions are used and
failures become NULLs that callers turn into per-document error messages.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._documents.ejson import MAX_DATE_MS, MIN_DATE_MS
from pipeline_stages._mql.kinds import (
    EJSON_WRAPPERS,
    INT32_MAX,
    INT32_MIN,
    Kind,
    is_integral,
    is_number,
    kind_in,
    kind_or_computed,
    schema_of,
)

#: MQL's cross-type sort order (BSON comparison order); equal ranks compare by value.
#: Aggregation expressions order missing before null (`{$eq: ["$nope", null]}` is false);
#: the query language's `{a: null}` matching missing is the query compiler's business.
TYPE_RANK: dict[str, int] = {
    "minKey": 0,
    "missing": 1,
    "null": 2,
    "int": 3,
    "long": 3,
    "double": 3,
    "decimal": 3,
    "string": 4,
    "object": 5,
    "array": 6,
    "binData": 7,
    "objectId": 8,
    "bool": 9,
    "date": 10,
    "timestamp": 11,
    "regex": 12,
    "maxKey": 13,
    "unknown": 14,
}

#: The ISO format dates are written in inside the VARIANT (Spark datetime pattern).
DATE_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"

# --------------------------------------------------------------------------- constructors


def missing() -> Column:
    """A missing value."""
    return F.lit(None).cast("variant")


def null() -> Column:
    """An MQL null."""
    return F.parse_json(F.lit("null"))


def from_long(col: Column) -> Column:
    """An MQL int/long from a Spark integral column (SQL NULL stays missing)."""
    return col.cast("bigint").cast("variant")


def from_double(col: Column) -> Column:
    """An MQL double from a Spark numeric column."""
    return col.cast("double").cast("variant")


def from_string(col: Column) -> Column:
    """An MQL string from a Spark string column."""
    return col.cast("string").cast("variant")


def from_bool(col: Column) -> Column:
    """An MQL bool from a Spark boolean column."""
    return col.cast("boolean").cast("variant")


def from_timestamp(col: Column) -> Column:
    """An MQL date (EJSON `{"$date": ...}`) from a Spark timestamp column (UTC session)."""
    iso = F.date_format(col, DATE_PATTERN)
    return F.when(col.isNotNull(), F.to_variant_object(F.named_struct(F.lit("$date"), iso)))


def timestamp_from_ms(millis: Column) -> Column:
    """A Spark TIMESTAMP from milliseconds since the epoch; NULL outside the years 1 to 9999.

    Never raises: `timestamp_millis` fails the whole query (ANSI `DATETIME_OVERFLOW`) beyond
    Spark's range, and one document's value must not do that. The years 1 to 9999 are
    Sluice's date range everywhere (`_documents.ejson.MIN_DATE_MS`).
    """
    return F.timestamp_millis(F.when(millis.between(MIN_DATE_MS, MAX_DATE_MS), millis))


def from_epoch_ms(col: Column) -> Column:
    """An MQL date from milliseconds since the epoch (missing outside the years 1 to 9999)."""
    return from_timestamp(timestamp_from_ms(col))


def from_array(col: Column) -> Column:
    """An MQL array from a Spark `ARRAY<VARIANT>` (SQL NULL elements become MQL null)."""
    return col.cast("variant")


def literal(value: Any) -> Column:
    """A VARIANT column for a Python/JSON literal (a `datetime` becomes an MQL date)."""
    if isinstance(value, datetime):
        return from_epoch_ms(F.lit(int(value.timestamp() * 1000)))
    if isinstance(value, bool):
        return F.lit(value).cast("variant")
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return F.lit(value).cast("bigint").cast("variant")
    if isinstance(value, float):
        return F.lit(value).cast("double").cast("variant")
    if isinstance(value, str):
        return F.lit(value).cast("variant")
    if value is None:
        return null()
    # Objects, arrays, huge integers: parsing keeps nested values exactly as written, and
    # Spark folds `parse_json` of a literal at plan time.
    return F.parse_json(F.lit(json.dumps(value, allow_nan=False, default=str)))


def literal_kind(value: Any) -> str:
    """The MQL type name of a JSON literal."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if INT32_MIN <= value <= INT32_MAX else "long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, datetime):
        return "date"
    if isinstance(value, dict) and len(value) == 1:
        return dict(EJSON_WRAPPERS).get(next(iter(value)), "object")
    return "object"


# --------------------------------------------------------------------------- extractors


def as_double(value: Column, kind: Kind = None) -> Column:
    """The numeric value as a Spark DOUBLE; NULL when the value is not a number."""
    num = F.try_variant_get(value, "$", "double")
    if isinstance(kind, str):
        if kind in ("int", "double"):
            return num
        if kind not in ("long", "decimal"):
            return F.lit(None).cast("double")
    # Wrapped numbers hold their digits as a string; variant casts parse it.
    wrapped = F.try_variant_get(value, '$["$numberDecimal"]', "double")
    return F.when(is_number(value, kind), F.coalesce(num, wrapped))


def as_long(value: Column, kind: Kind = None) -> Column:
    """The integral value as a Spark BIGINT; NULL unless the value is an int or long."""
    num = F.try_variant_get(value, "$", "bigint")
    if isinstance(kind, str):
        if kind == "int":
            return num
        if kind != "long":
            return F.lit(None).cast("bigint")
    wrapped = F.try_variant_get(value, '$["$numberLong"]', "bigint")
    return F.when(is_integral(value, kind), F.coalesce(num, wrapped))


def as_whole_number(value: Column, kind: Kind = None) -> Column:
    """A BIGINT for ints, longs, and doubles with an integral value in int64 range; else NULL.

    This is MongoDB's `integral64Bit()` test: `2.0` is accepted where an integer is required.
    """
    dbl = as_double(value, kind)
    whole = F.when(
        (dbl == F.floor(dbl)) & (dbl >= -(2.0**63)) & (dbl < 2.0**63), dbl.try_cast("bigint")
    )
    return F.coalesce(as_long(value, kind), whole)


def as_string(value: Column, kind: Kind = None) -> Column:
    """The value as a Spark STRING when it is an MQL string; NULL otherwise."""
    text = F.try_variant_get(value, "$", "string")
    if isinstance(kind, str) and kind == "string":
        return text
    if kind is None:
        return F.when(schema_of(value) == "STRING", text)
    return F.when(kind_in(kind, ("string",)), text)


def as_bool(value: Column, kind: Kind = None) -> Column:
    """The value as a Spark BOOLEAN when it is an MQL bool; NULL otherwise."""
    flag = F.try_variant_get(value, "$", "boolean")
    if isinstance(kind, str) and kind == "bool":
        return flag
    if kind is None:
        return F.when(schema_of(value) == "BOOLEAN", flag)
    return F.when(kind_in(kind, ("bool",)), flag)


def as_timestamp(value: Column, kind: Kind = None) -> Column:
    """The value as a Spark TIMESTAMP when it is an MQL date in the years 1 to 9999; NULL
    otherwise.

    Accepts `{"$date": "<ISO>"}`, `{"$date": <epoch ms>}` and
    `{"$date": {"$numberLong": "<epoch ms>"}}`, the relaxed and canonical EJSON forms.
    """
    inner = '$["$date"]'
    iso = F.try_variant_get(value, inner, "string")
    # An ISO string never parses as a number, so `bigint` only matches epoch milliseconds.
    # It is only tried when the text has no `:` (every ISO date-time has one) or is an object
    # (`{"$numberLong": ...}` reads as its JSON): a failing variant cast throws inside
    # `try_variant_get`, ~9 us per ISO date (measured).
    maybe_millis = iso.isNull() | (F.instr(iso, ":") == 0) | iso.startswith("{")
    millis = F.when(
        maybe_millis,
        F.coalesce(
            F.try_variant_get(value, inner, "bigint"),
            F.try_variant_get(value, '$["$date"]["$numberLong"]', "string").try_cast("bigint"),
        ),
    )
    # No type check: every part reads `$date`, so `parsed` is NULL unless the value is an
    # object with a `$date` key, which is what `kind_of` calls a date (`$date` is the first
    # wrapper `_object_kind` tests). Checking the kind too cost ~2 us per value (measured).
    del kind
    parsed = F.try_to_timestamp(iso)
    in_range = F.unix_millis(parsed).between(MIN_DATE_MS, MAX_DATE_MS)
    return F.coalesce(timestamp_from_ms(millis), F.when(in_range, parsed))


def as_epoch_ms(value: Column, kind: Kind = None) -> Column:
    """The date as milliseconds since the epoch (BIGINT); NULL unless the value is a date."""
    return F.unix_millis(as_timestamp(value, kind))


def as_array(value: Column, kind: Kind = None) -> Column:
    """The value as a Spark `ARRAY<VARIANT>` when it is an MQL array; NULL otherwise."""
    # A variant cast to array<variant> fails (NULL) for non-arrays, so no guard is needed.
    del kind
    return F.try_variant_get(value, "$", "array<variant>")


def as_object_map(value: Column, kind: Kind = None) -> Column:
    """The value as a Spark `MAP<STRING, VARIANT>` when it is an MQL object; NULL otherwise."""
    as_map = F.try_variant_get(value, "$", "map<string, variant>")
    if isinstance(kind, str) and kind == "object":
        return as_map
    return F.when(kind_in(kind_or_computed(value, kind), ("object",)), as_map)


def to_json(value: Column) -> Column:
    """Serialise a value to relaxed Extended JSON text (NULL for missing)."""
    return F.to_json(value)
