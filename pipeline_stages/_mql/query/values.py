"""Typed views of VARIANT values for the query-filter compiler.

Query comparisons are type-bracketed, so nearly every operator asks what type a value has
and then reads it. Spark's typed extraction from a VARIANT (`try_variant_get(v, '$',
'bigint')`) builds and interprets a `Cast` expression per call, several times slower than
serialising a scalar with `to_json`. `Typed` therefore pairs a value with its JSON text,
computed once, and answers type questions and reads scalars from that text:

| MQL type  | JSON text                   | read as                                      |
|-----------|-----------------------------|----------------------------------------------|
| missing   | SQL NULL                    |                                              |
| null      | `null`                      |                                              |
| number    | `5`, `-1.5`, `1.0E300`      | `try_cast` to BIGINT (whole) or DOUBLE       |
| string    | `"..."` (JSON-escaped)      | the text between the quotes, unless escaped  |
| bool      | `true`, `false`             |                                              |
| array     | `[...]`                     |                                              |
| date      | `{"$date":...}`             | epoch milliseconds                           |
| objectId  | `{"$oid":"<hex>"}`          |                                              |
| long/decimal wrappers | `{"$numberLong":...}`, `{"$numberDecimal":...}` |                |
| object    | any other `{...}`           |                                              |

These follow `kinds.kind_of` (the encoding table in `values.py`). The text cannot tell
`5.0` (a double) from `5` when Spark stores `5.0` as `DECIMAL(1,0)`, so `$type` tests for
`int`, `long` and `double` read the variant's schema instead; comparisons are by value and
do not care.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V

_INTEGRAL_SCHEMAS = ("BIGINT", "INT", "SMALLINT", "TINYINT")
_WRAPPERS = ('{"$date":', '{"$oid":', '{"$numberLong":', '{"$numberDecimal":')
#: The JSON texts of whole numbers, and the start of any number's (see `Typed._as_whole`).
_WHOLE_TEXT = "^-?[0-9]+$"
_NUMBER_TEXT = "^-?[0-9]"


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
    """True for any object value, EJSON wrappers included (cheap: no serialisation)."""
    return F.try_variant_get(value, "$", "struct<>").isNotNull()


def as_object_map(value: Column) -> Column:
    """The value as `MAP<STRING, VARIANT>` when it is an object; NULL otherwise."""
    return F.try_variant_get(value, "$", "map<string, variant>")


def typed_struct(value: Column) -> Column:
    """`STRUCT<v: VARIANT, j: STRING>`: a value with its JSON text."""
    return F.struct(value.alias("v"), V.to_json(value).alias("j"))


def typed_array(values: Column) -> Column:
    """An `ARRAY<VARIANT>` as an array of `typed_struct`s.

    Inside a lambda Spark re-evaluates every occurrence of an expression; serialising each
    element once here lets every test read the text as a plain field.
    """
    return F.transform(values, typed_struct)


@dataclass(frozen=True)
class Typed:
    """A VARIANT value and its JSON text (SQL NULL when the value is missing)."""

    value: Column
    json: Column

    @classmethod
    def of(cls, value: Column) -> Typed:
        """Type `value` (outside lambdas Spark serialises it once per row)."""
        return cls(value, V.to_json(value))

    @classmethod
    def document(cls, value: Column) -> Typed:
        """A value known to be a document, typed without serialising it.

        Type tests answer "object"; the JSON text is a stand-in, so nothing may compare it.
        """
        return cls(value, F.lit("{}"))

    @classmethod
    def of_struct(cls, typed: Column) -> Typed:
        """The view of a `typed_struct` (a lambda variable over a `typed_array`)."""
        return cls(typed["v"], typed["j"])

    # ----------------------------------------------------------------- type tests

    def is_missing(self) -> Column:
        """True when the value is missing."""
        return self.json.isNull()

    def is_null(self) -> Column:
        """True for an explicit null."""
        return F.coalesce(self.json == "null", F.lit(False))

    def is_nullish(self) -> Column:
        """True for null or missing (what `{a: null}` matches)."""
        return F.coalesce(self.json == "null", F.lit(True))

    def is_number(self) -> Column:
        """True for int, long, double and decimal values."""
        plain = self._as_real().isNotNull()
        return plain | self._starts(*_WRAPPERS[2:])

    def is_string(self) -> Column:
        """True for strings."""
        return self._starts('"')

    def is_bool(self) -> Column:
        """True for booleans."""
        return F.coalesce(self.json.isin("true", "false"), F.lit(False))

    def is_array(self) -> Column:
        """True for arrays."""
        return self._starts("[")

    def is_date(self) -> Column:
        """True for dates."""
        return self._starts(_WRAPPERS[0])

    def is_object_id(self) -> Column:
        """True for ObjectIds."""
        return self._starts(_WRAPPERS[1]) & self.json.endswith('"}')

    def is_object(self) -> Column:
        """True for documents proper (not EJSON-wrapped scalars)."""
        return self._starts("{") & ~self._starts(*_WRAPPERS)

    def _as_whole(self) -> Column:
        """The JSON text as BIGINT when it is a whole number's; NULL otherwise.

        A `try_cast` that fails is not cheap: Spark's exact string-to-number cast throws and
        catches an exception with a stack trace per value (a fifth of the executors' time in a
        `$match` on fractional values, measured). So the cast only sees the texts it turns
        into a BIGINT, as `to_json` writes them: digits after an optional `-` (never a `+`,
        a space or a `.` first; NaN and the infinities are written as strings).
        """
        return F.when(self.json.rlike(_WHOLE_TEXT), self.json.try_cast("bigint"))

    def _as_real(self) -> Column:
        """The JSON text as DOUBLE when it is a number's; NULL otherwise (see `_as_whole`)."""
        return F.when(self.json.rlike(_NUMBER_TEXT), self.json.try_cast("double"))

    def _starts(self, *prefixes: str) -> Column:
        test = self.json.startswith(prefixes[0])
        for prefix in prefixes[1:]:
            test = test | self.json.startswith(prefix)
        return F.coalesce(test, F.lit(False))

    # ----------------------------------------------------------------- readers

    def by_number(
        self, whole: Callable[[Column], Column], real: Callable[[Column], Column]
    ) -> Column:
        """Test a number: `whole` on integers (as BIGINT), `real` on the rest (as DOUBLE).

        NULL for non-numbers (and where `whole`/`real` are NULL): callers coalesce.
        Only number texts cast: strings keep their quotes, `true`/`null` do not parse.
        """
        v = self.value
        return F.coalesce(
            whole(self._as_whole()),
            real(self._as_real()),
            F.when(
                self._starts(_WRAPPERS[2]),
                whole(F.try_variant_get(v, '$["$numberLong"]', "bigint")),
            ),
            F.when(
                self._starts(_WRAPPERS[3]),
                real(F.try_variant_get(v, '$["$numberDecimal"]', "double")),
            ),
        )

    def as_string(self) -> Column:
        """The string (only meaningful where `is_string`).

        The JSON text between the quotes is the string unless it holds an escape.
        """
        unquoted = F.substring(self.json, F.lit(2), F.length(self.json) - 2)
        slow = F.try_variant_get(self.value, "$", "string")
        return F.when(F.instr(self.json, "\\") == 0, unquoted).otherwise(slow)

    def as_epoch_ms(self) -> Column:
        """The date as epoch milliseconds (only meaningful where `is_date`).

        Fast path for the ISO form `{"$date":"<ISO>"}`; the epoch forms `{"$date": <ms>}`
        and `{"$date": {"$numberLong": ...}}` are read from the variant.
        """
        iso = F.substring(self.json, F.lit(11), F.length(self.json) - 12)
        return F.when(self._starts('{"$date":"'), F.unix_millis(F.try_to_timestamp(iso))).otherwise(
            F.coalesce(
                F.try_variant_get(self.value, '$["$date"]["$numberLong"]', "bigint"),
                F.try_variant_get(self.value, '$["$date"]', "bigint"),
            )
        )

    def as_object_id(self) -> Column:
        """The ObjectId's JSON text, lower-cased (only meaningful where `is_object_id`)."""
        return F.lower(self.json)

    def as_array(self) -> Column:
        """The array as `ARRAY<VARIANT>` (NULL for non-arrays)."""
        return as_array(self.value)

    # ----------------------------------------------------------------- MQL type names

    def is_type(self, name: str) -> Column:
        """True when the value has MQL type `name` (a `$type` alias; `"number"` included).

        BSON types that JSON documents cannot carry (binData, regex, timestamp, minKey, ...)
        never match.
        """
        if name in ("int", "long", "double"):
            return self._numeric_type(name)
        test = _TYPE_TESTS.get(name)
        return test(self) if test is not None else F.lit(False)

    def _numeric_type(self, name: str) -> Column:
        schema = F.schema_of_variant(self.value)
        if name == "double":
            test = schema.isin("DOUBLE", "FLOAT") | schema.startswith("DECIMAL")
            return F.coalesce(test, F.lit(False))
        whole = self._as_whole()
        small = whole.between(K.INT32_MIN, K.INT32_MAX)
        integral = schema.isin(*_INTEGRAL_SCHEMAS)
        if name == "int":
            return F.coalesce(integral & small, F.lit(False))
        return F.coalesce(integral & ~small, F.lit(False)) | self._starts(_WRAPPERS[2])


_TYPE_TESTS: dict[str, Callable[[Typed], Column]] = {
    "string": Typed.is_string,
    "object": Typed.is_object,
    "array": Typed.is_array,
    "objectId": Typed.is_object_id,
    "bool": Typed.is_bool,
    "date": Typed.is_date,
    "null": Typed.is_null,
    "decimal": lambda t: t._starts(_WRAPPERS[3]),
    "number": Typed.is_number,
}
