"""Typed views of VARIANT values for the query-filter compiler.

A query tests many operators against the same value, and almost every test first asks what
type the value has (query comparisons are type-bracketed). Reading the type means calling
`schema_of_variant`, so `Typed` pairs a value with its schema string, computed once, and
answers every type question with one cheap string test on it. Spark's common-subexpression
elimination then evaluates `schema_of_variant` once per field path outside lambdas.

The type rules mirror `values.mql_type` (the encoding table in `values.py`): an integer
variant is an int or long, a decimal or double variant is a double, `{"$date": ...}` is a
date, `{"$oid": ...}` an objectId, `{"$numberLong"|"$numberDecimal": ...}` a long/decimal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import values as V

#: Stand-in schema for a missing value, so type tests are never NULL.
MISSING = "MISSING"

_INTEGRAL = ("BIGINT", "INT", "SMALLINT", "TINYINT")
_LONG_WRAPPER = "OBJECT<`$numberLong`: STRING>"
_DECIMAL_WRAPPER = "OBJECT<`$numberDecimal`: STRING>"
_OID = "OBJECT<`$oid`: STRING>"
_DATE_PREFIX = "OBJECT<`$date`:"
_WRAPPER_PREFIXES = (_DATE_PREFIX, "OBJECT<`$numberLong`:", "OBJECT<`$numberDecimal`:")


def field_path(name: str) -> str | None:
    """A VARIANT path selecting field `name`, or None when no path syntax can spell it.

    Spark's variant paths have no escapes: `["..."]` cannot contain `"` and `['...']`
    cannot contain `'`.
    """
    if '"' not in name:
        return f'$["{name}"]'
    if "'" not in name:
        return f"$['{name}']"
    return None


def get_field(value: Column, name: str) -> Column:
    """Field `name` of an object value; NULL (missing) for non-objects or absent fields."""
    path = field_path(name)
    if path is None:
        return F.try_variant_get(value, "$", "map<string, variant>")[name]
    return F.try_variant_get(value, path, "variant")


def get_index(value: Column, index: int) -> Column:
    """Element `index` of an array value; NULL (missing) otherwise."""
    return F.try_variant_get(value, f"$[{index}]", "variant")


def array_index(part: str) -> int | None:
    """The array index a path component names (`"0"`, `"12"`), or None."""
    if part.isdigit() and part.isascii() and str(int(part)) == part:
        return int(part)
    return None


def as_array(value: Column) -> Column:
    """The value as `ARRAY<VARIANT>` when it is an array; NULL otherwise."""
    return F.try_variant_get(value, "$", "array<variant>")


def is_any_object(value: Column) -> Column:
    """True for any object value, EJSON wrappers included (a cheap test: no schema walk)."""
    return F.try_variant_get(value, "$", "struct<>").isNotNull()


def as_object_map(value: Column) -> Column:
    """The value as `MAP<STRING, VARIANT>` when it is an object; NULL otherwise."""
    return F.try_variant_get(value, "$", "map<string, variant>")


def schema_tag(value: Column) -> Column:
    """The value's schema string, `MISSING` for a missing value (never NULL)."""
    return F.coalesce(F.schema_of_variant(value), F.lit(MISSING))


def typed_struct(value: Column) -> Column:
    """`STRUCT<v: VARIANT, s: STRING>`: a value with its schema, computed once."""
    return F.struct(value.alias("v"), schema_tag(value).alias("s"))


def typed_array(values: Column) -> Column:
    """An `ARRAY<VARIANT>` as an array of `typed_struct`s.

    Inside a lambda Spark re-evaluates every occurrence of `schema_of_variant(x)`; typing
    each element once here lets every test read the schema as a plain field.
    """
    return F.transform(values, typed_struct)


@dataclass(frozen=True)
class Typed:
    """A VARIANT value and its (never NULL) schema string: type tests without recomputation."""

    value: Column
    schema: Column

    @classmethod
    def of(cls, value: Column) -> Typed:
        """Type `value`: one `schema_of_variant` expression, which Spark evaluates once per row
        outside lambdas (common-subexpression elimination)."""
        return cls(value, schema_tag(value))

    @classmethod
    def of_struct(cls, typed: Column) -> Typed:
        """The view of a `typed_struct` (a lambda variable over a `typed_array`)."""
        return cls(typed["v"], typed["s"])

    # ----------------------------------------------------------------- type tests

    def is_missing(self) -> Column:
        """True when the value is missing."""
        return self.schema == MISSING

    def is_null(self) -> Column:
        """True for an explicit null."""
        return self.schema == "VOID"

    def is_nullish(self) -> Column:
        """True for null or missing (what `{a: null}` matches)."""
        return self.schema.isin(MISSING, "VOID")

    def is_integral(self) -> Column:
        """True for int and long values."""
        return self.schema.isin(*_INTEGRAL, _LONG_WRAPPER)

    def is_number(self) -> Column:
        """True for int, long, double and decimal values."""
        exact = self.schema.isin(*_INTEGRAL, "DOUBLE", "FLOAT", _LONG_WRAPPER, _DECIMAL_WRAPPER)
        return exact | self.schema.startswith("DECIMAL")

    def is_string(self) -> Column:
        """True for strings."""
        return self.schema == "STRING"

    def is_bool(self) -> Column:
        """True for booleans."""
        return self.schema == "BOOLEAN"

    def is_array(self) -> Column:
        """True for arrays."""
        return self.schema.startswith("ARRAY")

    def is_date(self) -> Column:
        """True for dates (EJSON `{"$date": ...}` objects or variant timestamps)."""
        return self.schema.startswith(_DATE_PREFIX) | self.schema.isin(
            "TIMESTAMP", "TIMESTAMP_NTZ", "DATE"
        )

    def is_object_id(self) -> Column:
        """True for ObjectIds (`{"$oid": "<hex>"}`)."""
        return self.schema == _OID

    def is_object(self) -> Column:
        """True for documents proper: objects that are not EJSON-wrapped scalars."""
        wrapped = self.schema == _OID
        for prefix in _WRAPPER_PREFIXES:
            wrapped = wrapped | self.schema.startswith(prefix)
        return self.schema.startswith("OBJECT") & ~wrapped

    # ----------------------------------------------------------------- extractors

    def by_number(
        self, whole: Callable[[Column], Column], real: Callable[[Column], Column]
    ) -> Column:
        """Test a number: `whole` on integers (as BIGINT), `real` on the rest (as DOUBLE).

        Non-numbers give False. One CASE over the schema: no separate "is it a number" test.
        """
        s, v = self.schema, self.value
        return (
            F.when(s.isin(*_INTEGRAL), whole(F.try_variant_get(v, "$", "bigint")))
            .when(
                s.isin("DOUBLE", "FLOAT") | s.startswith("DECIMAL"),
                real(F.try_variant_get(v, "$", "double")),
            )
            .when(s == _LONG_WRAPPER, whole(F.try_variant_get(v, '$["$numberLong"]', "bigint")))
            .when(
                s == _DECIMAL_WRAPPER, real(F.try_variant_get(v, '$["$numberDecimal"]', "double"))
            )
            .otherwise(F.lit(False))
        )

    def as_double(self) -> Column:
        """The number as DOUBLE (only meaningful where `is_number`)."""
        return F.coalesce(
            F.try_variant_get(self.value, "$", "double"),
            F.try_variant_get(self.value, '$["$numberLong"]', "double"),
            F.try_variant_get(self.value, '$["$numberDecimal"]', "double"),
        )

    def as_long(self) -> Column:
        """The integer as BIGINT (only meaningful where `is_integral`)."""
        return F.coalesce(
            F.try_variant_get(self.value, "$", "bigint"),
            F.try_variant_get(self.value, '$["$numberLong"]', "bigint"),
        )

    def as_string(self) -> Column:
        """The string (only meaningful where `is_string`: other values are rendered as text)."""
        return F.try_variant_get(self.value, "$", "string")

    def as_bool(self) -> Column:
        """The boolean (only meaningful where `is_bool`)."""
        return F.try_variant_get(self.value, "$", "boolean")

    def as_epoch_ms(self) -> Column:
        """The date as epoch milliseconds (only meaningful where `is_date`)."""
        iso = F.try_variant_get(self.value, '$["$date"]', "string")
        return F.coalesce(
            F.try_variant_get(self.value, '$["$date"]["$numberLong"]', "bigint"),
            F.when(
                self.schema == "OBJECT<`$date`: STRING>", F.unix_millis(F.try_to_timestamp(iso))
            ).otherwise(F.try_variant_get(self.value, '$["$date"]', "bigint")),
            F.unix_millis(F.try_variant_get(self.value, "$", "timestamp")),
        )

    def as_object_id(self) -> Column:
        """The ObjectId's hex digits, lower-cased (only meaningful where `is_object_id`)."""
        return F.lower(F.try_variant_get(self.value, '$["$oid"]', "string"))

    def as_array(self) -> Column:
        """The array as `ARRAY<VARIANT>` (NULL for non-arrays)."""
        return as_array(self.value)

    def as_json(self) -> Column:
        """The value as JSON text (objects and arrays compare by it; keys come sorted)."""
        return V.to_json(self.value)

    # ----------------------------------------------------------------- MQL type names

    def is_type(self, name: str) -> Column:
        """True when the value has MQL type `name` (a `$type` alias; `"number"` included).

        BSON types that JSON documents cannot carry (regex, timestamp, minKey, ...) never
        match.
        """
        test = _TYPE_TESTS.get(name)
        return test(self) if test is not None else F.lit(False)


def _is_int32(value: Typed) -> Column:
    small = F.try_variant_get(value.value, "$", "bigint").between(V.INT32_MIN, V.INT32_MAX)
    return value.schema.isin(*_INTEGRAL) & small


def _is_int64(value: Typed) -> Column:
    wide = ~F.try_variant_get(value.value, "$", "bigint").between(V.INT32_MIN, V.INT32_MAX)
    return (value.schema.isin(*_INTEGRAL) & wide) | (value.schema == _LONG_WRAPPER)


def _is_double(value: Typed) -> Column:
    return value.schema.isin("DOUBLE", "FLOAT") | value.schema.startswith("DECIMAL")


_TYPE_TESTS: dict[str, Callable[[Typed], Column]] = {
    "double": _is_double,
    "string": Typed.is_string,
    "object": Typed.is_object,
    "array": Typed.is_array,
    "binData": lambda t: t.schema == "BINARY",
    "objectId": Typed.is_object_id,
    "bool": Typed.is_bool,
    "date": Typed.is_date,
    "null": Typed.is_null,
    "int": _is_int32,
    "long": _is_int64,
    "decimal": lambda t: t.schema == _DECIMAL_WRAPPER,
    "number": Typed.is_number,
}
