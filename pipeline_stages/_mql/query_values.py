"""Typed views of VARIANT values for the query-filter compiler.

A query tests many operators against the same value, and almost every test first asks what
type the value has (query comparisons are type-bracketed). `Typed` pairs a value with a small
integer *kind*, computed once per value from one `schema_of_variant` call through one regex
and one lookup, so each type test is a single integer comparison and the generated code stays
small. The kinds follow `values.mql_type` (the encoding table in `values.py`): an integer
variant is an int or long, a decimal or double variant is a double, `{"$date": ...}` is a
date, `{"$oid": ...}` an objectId, `{"$numberLong"|"$numberDecimal": ...}` a long/decimal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import values as V

# Kind codes (a value's MQL type class).
MISSING, NULL, INTEGER, DOUBLE, STRING, BOOL, ARRAY, OBJECT = range(8)
DATE, OBJECT_ID, BINARY, LONG_WRAPPED, DECIMAL_WRAPPED, OTHER = range(8, 14)

#: The leading token of a schema string that decides its kind; wrappers need a longer prefix.
_KEY_PATTERN = r"^(OBJECT<`\$(?:date|numberLong|numberDecimal)`:|OBJECT<`\$oid`: STRING>$|[A-Z_]+)"
_KINDS: dict[str, int] = {
    "MISSING": MISSING,
    "VOID": NULL,
    **dict.fromkeys(("BIGINT", "INT", "SMALLINT", "TINYINT"), INTEGER),
    **dict.fromkeys(("DOUBLE", "FLOAT", "DECIMAL"), DOUBLE),
    "STRING": STRING,
    "BOOLEAN": BOOL,
    "ARRAY": ARRAY,
    "OBJECT": OBJECT,
    **dict.fromkeys(("OBJECT<`$date`:", "TIMESTAMP", "TIMESTAMP_NTZ", "DATE"), DATE),
    "OBJECT<`$oid`: STRING>": OBJECT_ID,
    "BINARY": BINARY,
    "OBJECT<`$numberLong`:": LONG_WRAPPED,
    "OBJECT<`$numberDecimal`:": DECIMAL_WRAPPED,
}


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
    if part.isascii() and part.isdigit() and str(int(part)) == part:
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


def kind_of(value: Column) -> Column:
    """The value's kind code (never NULL), reading its schema once."""
    schema = F.coalesce(F.schema_of_variant(value), F.lit("MISSING"))
    lookup = F.create_map(*(F.lit(x) for pair in _KINDS.items() for x in pair))
    key = F.regexp_extract(schema, _KEY_PATTERN, 1)
    return F.coalesce(F.try_element_at(lookup, key), F.lit(OTHER))


def typed_struct(value: Column) -> Column:
    """`STRUCT<v: VARIANT, k: INT>`: a value with its kind."""
    return F.struct(value.alias("v"), kind_of(value).alias("k"))


def typed_array(values: Column) -> Column:
    """An `ARRAY<VARIANT>` as an array of `typed_struct`s.

    Inside a lambda Spark re-evaluates every occurrence of an expression; typing each element
    once here lets every test read the kind as a plain field.
    """
    return F.transform(values, typed_struct)


@dataclass(frozen=True)
class Typed:
    """A VARIANT value and its kind code: type tests without recomputation."""

    value: Column
    kind: Column

    @classmethod
    def of(cls, value: Column) -> Typed:
        """Type `value` (outside lambdas Spark evaluates the shared kind once per row)."""
        return cls(value, kind_of(value))

    @classmethod
    def of_struct(cls, typed: Column) -> Typed:
        """The view of a `typed_struct` (a lambda variable over a `typed_array`)."""
        return cls(typed["v"], typed["k"])

    # ----------------------------------------------------------------- type tests

    def is_kind(self, *kinds: int) -> Column:
        """True when the value's kind is one of `kinds`."""
        if len(kinds) == 1:
            return self.kind == kinds[0]
        return self.kind.isin(*kinds)

    def is_missing(self) -> Column:
        """True when the value is missing."""
        return self.kind == MISSING

    def is_null(self) -> Column:
        """True for an explicit null."""
        return self.kind == NULL

    def is_nullish(self) -> Column:
        """True for null or missing (what `{a: null}` matches)."""
        return self.kind <= NULL

    def is_integral(self) -> Column:
        """True for int and long values."""
        return self.is_kind(INTEGER, LONG_WRAPPED)

    def is_number(self) -> Column:
        """True for int, long, double and decimal values."""
        return self.is_kind(INTEGER, DOUBLE, LONG_WRAPPED, DECIMAL_WRAPPED)

    def is_string(self) -> Column:
        """True for strings."""
        return self.kind == STRING

    def is_bool(self) -> Column:
        """True for booleans."""
        return self.kind == BOOL

    def is_array(self) -> Column:
        """True for arrays."""
        return self.kind == ARRAY

    def is_date(self) -> Column:
        """True for dates."""
        return self.kind == DATE

    def is_object_id(self) -> Column:
        """True for ObjectIds."""
        return self.kind == OBJECT_ID

    def is_object(self) -> Column:
        """True for documents proper (not EJSON-wrapped scalars)."""
        return self.kind == OBJECT

    # ----------------------------------------------------------------- extractors

    def by_number(
        self, whole: Callable[[Column], Column], real: Callable[[Column], Column]
    ) -> Column:
        """Test a number: `whole` on integers (as BIGINT), `real` on the rest (as DOUBLE).

        Non-numbers give False; the result may be NULL only if `whole`/`real` return NULL.
        """
        v = self.value
        return (
            F.when(self.kind == INTEGER, whole(F.try_variant_get(v, "$", "bigint")))
            .when(self.kind == DOUBLE, real(F.try_variant_get(v, "$", "double")))
            .when(
                self.kind == LONG_WRAPPED,
                whole(F.try_variant_get(v, '$["$numberLong"]', "bigint")),
            )
            .when(
                self.kind == DECIMAL_WRAPPED,
                real(F.try_variant_get(v, '$["$numberDecimal"]', "double")),
            )
            .otherwise(F.lit(False))
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
        """The date as epoch milliseconds (only meaningful where `is_date`).

        `{"$date": <ISO>}`, `{"$date": <ms>}`, `{"$date": {"$numberLong": ...}}` or a variant
        timestamp; only the ISO form is a string, and casting it to BIGINT fails to NULL.
        """
        v = self.value
        return F.coalesce(
            F.try_variant_get(v, '$["$date"]["$numberLong"]', "bigint"),
            F.try_variant_get(v, '$["$date"]', "bigint"),
            F.unix_millis(F.try_to_timestamp(F.try_variant_get(v, '$["$date"]', "string"))),
            F.unix_millis(F.try_variant_get(v, "$", "timestamp")),
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
        if name in ("int", "long"):
            small = self.as_long().between(V.INT32_MIN, V.INT32_MAX)
            fits = (self.kind == INTEGER) & (small if name == "int" else ~small)
            return fits | (self.kind == LONG_WRAPPED) if name == "long" else fits
        kinds = _TYPE_KINDS.get(name)
        return self.is_kind(*kinds) if kinds else F.lit(False)


_TYPE_KINDS: dict[str, tuple[int, ...]] = {
    "double": (DOUBLE,),
    "string": (STRING,),
    "object": (OBJECT,),
    "array": (ARRAY,),
    "binData": (BINARY,),
    "objectId": (OBJECT_ID,),
    "bool": (BOOL,),
    "date": (DATE,),
    "null": (NULL,),
    "decimal": (DECIMAL_WRAPPED,),
    "number": (INTEGER, DOUBLE, LONG_WRAPPED, DECIMAL_WRAPPED),
}
