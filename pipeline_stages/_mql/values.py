"""How MQL values live in Spark: one VARIANT column per value, typed at run time.

Documents are schemaless, so every MQL value is carried as a Spark `VARIANT` column and its
MQL type is read from the value itself. The encoding is:

| MQL                | in the VARIANT                                                     |
|--------------------|--------------------------------------------------------------------|
| missing            | SQL NULL (the column itself is NULL)                               |
| null               | a variant null (`is_variant_null`)                                 |
| int / long         | any variant integer (`BIGINT` in `schema_of_variant`); `int` when it fits in 32 bits |
| double             | variant `DOUBLE`, or `DECIMAL` (Spark's `parse_json` turns `1.5` into a decimal) |
| string, bool       | variant `STRING`, `BOOLEAN`                                        |
| object, array      | variant `OBJECT<…>`, `ARRAY<…>` (object keys come back sorted by name) |
| date               | the relaxed Extended JSON object `{"$date": "<yyyy-MM-ddTHH:mm:ss.SSSZ>"}` |
| objectId           | `{"$oid": "<24 hex>"}`                                             |

Dates are Extended JSON objects rather than variant timestamps because `to_json` renders a
variant timestamp as a plain string: with the EJSON form, serialising a document natively
yields exactly the relaxed Extended JSON that `sluice process` and the sinks print.

Every function here builds Spark `Column`s and never raises at run time: Spark 4 runs with ANSI
mode, where a failing cast fails the whole query, so only `try_*` conversions are used and
failures become NULLs that callers turn into per-document error messages.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

#: MQL's cross-type sort order (BSON comparison order); equal ranks compare by value.
TYPE_RANK: dict[str, int] = {
    "minKey": 0,
    "missing": 1,
    "null": 1,
    "int": 2,
    "long": 2,
    "double": 2,
    "decimal": 2,
    "string": 3,
    "object": 4,
    "array": 5,
    "binData": 6,
    "objectId": 7,
    "bool": 8,
    "date": 9,
    "timestamp": 10,
    "regex": 11,
    "maxKey": 12,
}

NUMERIC_TYPES = ("int", "long", "double", "decimal")

#: The ISO format dates are written in inside the VARIANT (Spark datetime pattern).
DATE_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


# --------------------------------------------------------------------------- type tags


def schema_of(value: Column) -> Column:
    """The variant's Spark schema string (`BIGINT`, `OBJECT<...>`, ...); NULL when missing."""
    return F.schema_of_variant(value)


def mql_type(value: Column) -> Column:
    """The MQL type name of a value, as `$type` reports it (`"missing"` for a missing value)."""
    schema = schema_of(value)
    as_long = F.try_variant_get(value, "$", "bigint")
    return (
        F.when(value.isNull(), F.lit("missing"))
        .when(schema == "VOID", F.lit("null"))
        .when(
            schema.isin("BIGINT", "INT", "SMALLINT", "TINYINT"),
            F.when(as_long.between(INT32_MIN, INT32_MAX), F.lit("int")).otherwise(F.lit("long")),
        )
        .when(
            schema.startswith("DECIMAL") | schema.isin("DOUBLE", "FLOAT"),
            F.lit("double"),
        )
        .when(schema == "STRING", F.lit("string"))
        .when(schema == "BOOLEAN", F.lit("bool"))
        .when(schema.startswith("ARRAY"), F.lit("array"))
        .when(schema.isin("TIMESTAMP", "TIMESTAMP_NTZ", "DATE"), F.lit("date"))
        .when(schema.startswith("OBJECT<`$date`:"), F.lit("date"))
        .when(schema == "OBJECT<`$oid`: STRING>", F.lit("objectId"))
        .when(schema.startswith("OBJECT<`$numberDecimal`:"), F.lit("decimal"))
        .when(schema.startswith("OBJECT<`$numberLong`:"), F.lit("long"))
        .when(schema.startswith("OBJECT"), F.lit("object"))
        .when(schema == "BINARY", F.lit("binData"))
        .otherwise(F.lit("unknown"))
    )


def is_missing(value: Column) -> Column:
    """True when the value is missing (SQL NULL)."""
    return value.isNull()


def is_nullish(value: Column) -> Column:
    """True when the value is missing or null (what `$ifNull` and most operators treat as null)."""
    return value.isNull() | F.is_variant_null(value)


def is_number(value: Column) -> Column:
    """True for int, long, double and decimal values."""
    return mql_type(value).isin(*NUMERIC_TYPES)


def is_integral(value: Column) -> Column:
    """True for int and long values."""
    return mql_type(value).isin("int", "long")


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
    """An MQL date (EJSON `{"$date": ...}`) from a Spark timestamp column."""
    iso = F.date_format(F.to_utc_timestamp(col, "UTC"), DATE_PATTERN)
    return F.when(col.isNull(), missing()).otherwise(
        F.to_variant_object(F.named_struct(F.lit("$date"), iso))
    )


def from_epoch_ms(col: Column) -> Column:
    """An MQL date from milliseconds since the epoch."""
    return from_timestamp(F.timestamp_millis(col))


def literal(value: Any) -> Column:
    """A VARIANT column for a Python/JSON literal (a `datetime` becomes an MQL date)."""
    import json

    if isinstance(value, datetime):
        return from_epoch_ms(F.lit(int(value.timestamp() * 1000)))
    if isinstance(value, bool):
        return F.lit(value).cast("variant")
    if isinstance(value, int):
        return F.lit(value).cast("bigint").cast("variant")
    if isinstance(value, float):
        return F.lit(value).cast("double").cast("variant")
    if isinstance(value, str):
        return F.lit(value).cast("variant")
    if value is None:
        return null()
    # Objects and arrays: parsing keeps nested ints/doubles/dates exactly as written.
    return F.parse_json(F.lit(json.dumps(value, allow_nan=False, default=str)))


# --------------------------------------------------------------------------- extractors


def as_double(value: Column) -> Column:
    """The numeric value as a Spark DOUBLE; NULL when the value is not a number."""
    num = F.try_variant_get(value, "$", "double")
    long_wrapped = F.try_variant_get(value, '$["$numberLong"]', "string").try_cast("double")
    dec_wrapped = F.try_variant_get(value, '$["$numberDecimal"]', "string").try_cast("double")
    return F.when(is_number(value), F.coalesce(long_wrapped, dec_wrapped, num))


def as_long(value: Column) -> Column:
    """The integral value as a Spark BIGINT; NULL unless the value is an int or long."""
    num = F.try_variant_get(value, "$", "bigint")
    wrapped = F.try_variant_get(value, '$["$numberLong"]', "string").try_cast("bigint")
    return F.when(is_integral(value), F.coalesce(wrapped, num))


def as_string(value: Column) -> Column:
    """The value as a Spark STRING when it is an MQL string; NULL otherwise."""
    return F.when(schema_of(value) == "STRING", F.try_variant_get(value, "$", "string"))


def as_bool(value: Column) -> Column:
    """The value as a Spark BOOLEAN when it is an MQL bool; NULL otherwise."""
    return F.when(schema_of(value) == "BOOLEAN", F.try_variant_get(value, "$", "boolean"))


def as_timestamp(value: Column) -> Column:
    """The value as a Spark TIMESTAMP when it is an MQL date; NULL otherwise.

    Accepts `{"$date": "<ISO>"}`, `{"$date": <epoch ms>}` and
    `{"$date": {"$numberLong": "<epoch ms>"}}`, the relaxed and canonical EJSON forms.
    """
    iso = F.try_variant_get(value, '$["$date"]', "string")
    millis = F.coalesce(
        F.try_variant_get(value, '$["$date"]["$numberLong"]', "string").try_cast("bigint"),
        F.when(
            schema_of(value).isin("OBJECT<`$date`: BIGINT>", "OBJECT<`$date`: DOUBLE>"),
            F.try_variant_get(value, '$["$date"]', "bigint"),
        ),
    )
    parsed = F.coalesce(F.timestamp_millis(millis), F.try_to_timestamp(iso))
    return F.when(mql_type(value) == "date", parsed)


def as_epoch_ms(value: Column) -> Column:
    """The date as milliseconds since the epoch (BIGINT); NULL unless the value is a date."""
    return F.unix_millis(as_timestamp(value))


def as_array(value: Column) -> Column:
    """The value as a Spark `ARRAY<VARIANT>` when it is an MQL array; NULL otherwise."""
    return F.when(
        schema_of(value).startswith("ARRAY"), F.try_variant_get(value, "$", "array<variant>")
    )


def as_object_map(value: Column) -> Column:
    """The value as a Spark `MAP<STRING, VARIANT>` when it is an MQL object; NULL otherwise."""
    return F.when(
        mql_type(value) == "object", F.try_variant_get(value, "$", "map<string, variant>")
    )


def to_json(value: Column) -> Column:
    """Serialise a value to relaxed Extended JSON text (NULL for missing)."""
    return F.to_json(value)


# --------------------------------------------------------------------------- truthiness & order


def truthy(value: Column) -> Column:
    """MQL truthiness as a Spark BOOLEAN (never NULL).

    False, null, missing and numeric zero are false; everything else is true.
    """
    kind = mql_type(value)
    return (
        F.when(kind.isin("missing", "null"), F.lit(False))
        .when(kind == "bool", F.coalesce(as_bool(value), F.lit(False)))
        .when(kind.isin(*NUMERIC_TYPES), F.coalesce(as_double(value) != 0, F.lit(False)))
        .otherwise(F.lit(True))
    )


def type_rank(value: Column) -> Column:
    """The BSON comparison rank of a value's type (see `TYPE_RANK`)."""
    kind = mql_type(value)
    expr = F.when(F.lit(False), F.lit(0))
    for name, rank in TYPE_RANK.items():
        expr = expr.when(kind == name, F.lit(rank))
    return expr.otherwise(F.lit(99))


def compare(left: Column, right: Column) -> Column:
    """MQL comparison of two values: -1, 0 or 1 (an INT column, never NULL).

    Types compare by BSON rank first; numbers by value (int/long exactly, otherwise as
    doubles), strings by UTF-8 bytes, dates by instant, booleans false < true. Objects and
    arrays compare by their Extended JSON text, an approximation of BSON's field-by-field
    comparison that agrees on equality of equal documents.
    """
    rank_l, rank_r = type_rank(left), type_rank(right)
    both_integral = is_integral(left) & is_integral(right)

    def sign(a: Column, b: Column) -> Column:
        return F.when(a < b, F.lit(-1)).when(a > b, F.lit(1)).otherwise(F.lit(0))

    same_rank = (
        F.when(rank_l == TYPE_RANK["null"], F.lit(0))
        .when(both_integral, sign(as_long(left), as_long(right)))
        .when(rank_l == TYPE_RANK["double"], sign(as_double(left), as_double(right)))
        .when(rank_l == TYPE_RANK["string"], sign(as_string(left), as_string(right)))
        .when(rank_l == TYPE_RANK["bool"], sign(as_bool(left).cast("int"), as_bool(right).cast("int")))
        .when(rank_l == TYPE_RANK["date"], sign(as_epoch_ms(left), as_epoch_ms(right)))
        .otherwise(sign(F.to_json(left), F.to_json(right)))
    )
    return F.when(rank_l != rank_r, sign(rank_l, rank_r)).otherwise(same_rank)


def equals(left: Column, right: Column) -> Column:
    """MQL equality (`$eq` in expressions) as a Spark BOOLEAN; missing equals null."""
    return compare(left, right) == 0
