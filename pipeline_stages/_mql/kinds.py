"""MQL type tags of VARIANT values: `kind_of` and the checks built on it.

A value's MQL type is read from the VARIANT at run time (the encoding is in `values.py`).
**Type tags are expensive; compute them once**: every check here takes an optional
precomputed `kind` (a STRING column, ideally materialised with `Scope.bind`, or a Python
`str` when the type is known at compile time) and derives the tag itself only without one.
`kind_of` never calls `schema_of_variant` on objects or non-empty arrays: it walks the whole
value and is ~50x slower than the key probes used instead.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

NUMERIC_TYPES = ("int", "long", "double", "decimal")
INTEGRAL_TYPES = ("int", "long")

#: A type tag: a STRING column, a compile-time type name, or None ("compute it").
Kind = Column | str | None


def schema_of(value: Column) -> Column:
    """The variant's Spark schema string (`BIGINT`, `OBJECT<...>`, ...); NULL when missing."""
    return F.schema_of_variant(value)


def is_object_like(value: Column) -> Column:
    """True for any variant object, EJSON wrappers (`{"$date": ...}`) included. Cheap."""
    return F.try_variant_get(value, "$", "struct<>").isNotNull()


def is_array_value(value: Column) -> Column:
    """True when the value is an array, without copying or walking it."""
    # `$[0]` finds non-empty arrays in O(1); only scalars and `[]` reach the schema check.
    return F.try_variant_get(value, "$[0]", "variant").isNotNull() | (
        ~is_object_like(value) & (schema_of(value) == "ARRAY<VOID>")
    )


#: Leading word of `schema_of_variant` for scalars (and empty arrays) -> MQL type name.
_SCHEMA_KINDS = {
    "BIGINT": "long",
    "INT": "int",
    "SMALLINT": "int",
    "TINYINT": "int",
    "STRING": "string",
    "DECIMAL": "double",
    "DOUBLE": "double",
    "FLOAT": "double",
    "BOOLEAN": "bool",
    "VOID": "null",
    "ARRAY": "array",
    "TIMESTAMP": "date",
    "TIMESTAMP_NTZ": "date",
    "DATE": "date",
    "BINARY": "binData",
}


def _scalar_kind(value: Column) -> Column:
    # One `schema_of_variant` call and a literal-map lookup keep the generated code small;
    # a CASE per schema would repeat the call in every branch.
    head = F.substring_index(F.substring_index(schema_of(value), "(", 1), "<", 1)
    pairs = [c for k, v in _SCHEMA_KINDS.items() for c in (F.lit(k), F.lit(v))]
    kind = F.coalesce(F.create_map(*pairs)[head], F.lit("unknown"))
    # A range check on the BIGINT, not a cast to int: a failing variant cast (a string, a
    # long beyond int32) throws inside `try_variant_get`, ~8 us per value (measured: `$type`
    # of a string field cost 8.7 s per million documents, now 0.5 s).
    as_long = F.try_variant_get(value, "$", "bigint")
    fits_int = F.when(head == "BIGINT", as_long.between(INT32_MIN, INT32_MAX))
    return F.when(fits_int, F.lit("int")).otherwise(kind)


#: EJSON wrapper keys, in the order `_object_kind` tests them, and the type each one makes.
EJSON_WRAPPERS = (("$date", "date"), ("$oid", "objectId"), ("$numberDecimal", "decimal"),
             ("$numberLong", "long"))  # fmt: skip
_WRAPPER_PROBE = "struct<" + ", ".join(f"`{key}`: variant" for key, _ in EJSON_WRAPPERS) + ">"


def _object_kind(value: Column) -> Column:
    # One cast of the object to a struct of the wrapper keys looks all four up at once: four
    # `try_variant_get` key probes cost ~0.35 s each per million documents, the cast about as
    # much as one (measured with `F.hash`, one core). Spark's subexpression elimination computes
    # the repeated cast once in generated code.
    probe = F.try_variant_get(value, "$", _WRAPPER_PROBE)
    kind = F.when(probe[EJSON_WRAPPERS[0][0]].isNotNull(), F.lit(EJSON_WRAPPERS[0][1]))
    for key, name in EJSON_WRAPPERS[1:]:
        kind = kind.when(probe[key].isNotNull(), F.lit(name))
    return kind.otherwise(F.lit("object"))


def is_plain_object(value: Column) -> Column:
    """True when `kind_of` would say "object" (an object that is no EJSON wrapper), in one
    cast: about a third of `kind_of` on a parsed document (measured)."""
    probe = F.try_variant_get(value, "$", _WRAPPER_PROBE)
    plain = probe.isNotNull()
    for key, _ in EJSON_WRAPPERS:
        plain = plain & probe[key].isNull()
    return plain


def kind_of(value: Column) -> Column:
    """The MQL type name of a value, as `$type` reports it (`"missing"` for a missing value).

    Pass a cheap column (a materialised binding or a lambda variable): the value is referenced
    several times.
    """
    return (
        F.when(value.isNull(), F.lit("missing"))
        .when(is_object_like(value), _object_kind(value))
        .when(F.try_variant_get(value, "$[0]", "variant").isNotNull(), F.lit("array"))
        .otherwise(_scalar_kind(value))
    )


def kind_or_computed(value: Column, kind: Kind) -> Column:
    """`kind` as a tag column: computed from `value` when None, a literal when a name."""
    if kind is None:
        return kind_of(value)
    if isinstance(kind, str):
        return F.lit(kind)
    return kind


def kind_in(kind: Kind, names: tuple[str, ...] | list[str], value: Column | None = None) -> Column:
    """A BOOLEAN: the tag is one of `names` (folded to a literal for static kinds)."""
    if isinstance(kind, str):
        return F.lit(kind in names)
    if kind is None:
        if value is None:
            raise ValueError("kind_in needs a value when the kind is not given")
        kind = kind_of(value)
    return kind.isin(*names)


def is_missing(value: Column) -> Column:
    """True when the value is missing (SQL NULL)."""
    return value.isNull()


def is_nullish(value: Column, kind: Kind = None) -> Column:
    """True when the value is missing or null (what most operators treat as null)."""
    if isinstance(kind, str):
        return F.lit(kind in ("missing", "null"))
    if kind is not None:
        return kind.isin("missing", "null")
    return value.isNull() | F.is_variant_null(value)


def is_number(value: Column, kind: Kind = None) -> Column:
    """True for int, long, double and decimal values."""
    return kind_in(kind_or_computed(value, kind) if kind is None else kind, NUMERIC_TYPES)


def is_integral(value: Column, kind: Kind = None) -> Column:
    """True for int and long values."""
    return kind_in(kind_or_computed(value, kind) if kind is None else kind, INTEGRAL_TYPES)
