"""Value tests: one query operator applied to one value (no paths, no array expansion).

Each builder returns a `Test`, a function from a `Typed` value to a non-NULL BOOLEAN column.
Query comparisons are type-bracketed: `{$gt: 5}` only ever matches numbers, `{$lt: "m"}`
only strings, and so on; numbers of any width compare by value (`1 == 1.0`).

Equality with a string, bool, ObjectId, object or array literal compares JSON texts, both
printed by Spark from VARIANTs, which also brackets by type (only a string prints as a
quoted string). For objects and arrays this agrees with BSON on equal documents but is
field-order-insensitive (VARIANT sorts keys) and tells `1` from `1.0` inside them; their
ordering (`$gt: {...}`) compares JSON texts, an approximation of BSON order.
"""

from __future__ import annotations

import json
import math
import operator
from collections.abc import Callable, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql.query.literals import QueryLiteral, Regex, literal_json_column
from pipeline_stages._mql.query.values import Typed

Test = Callable[[Typed], Column]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

COMPARISONS: dict[str, Callable[[Column, Column], Column]] = {
    "$eq": operator.eq,
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}

#: The comparisons that hold between equal values (so NaN and null can match them).
INCLUSIVE = frozenset({"$eq", "$gte", "$lte"})

#: Literal kinds whose equality is equality of JSON text.
_BY_TEXT = ("string", "bool", "objectId", "object", "array")


def never(_: Typed) -> Column:
    """The test that matches nothing."""
    return F.lit(False)


def _false_if_null(column: Column) -> Column:
    return F.coalesce(column, F.lit(False))


def _text(lit: QueryLiteral) -> Column:
    """The JSON text Spark prints for a literal of a `_BY_TEXT` kind (constant-folded)."""
    if lit.kind == "objectId":
        return literal_json_column(json.dumps({"$oid": lit.value}))
    if lit.kind in ("object", "array"):
        return literal_json_column(lit.value)
    return literal_json_column(json.dumps(lit.value))


def _fits_int64(number: float) -> bool:
    return math.isfinite(number) and float(number).is_integer() and INT64_MIN <= number <= INT64_MAX


def _numeric(op_name: str, number: float) -> Test:
    """Compare numbers exactly: integers as BIGINT when both sides are whole, else DOUBLE."""
    op = COMPARISONS[op_name]
    if math.isnan(number):
        # NaN equals only NaN and orders below every number (documents rarely hold one).
        if op_name not in INCLUSIVE:
            return never
        # An integer is never NaN (a NULL integer means "not an integer": try the double).
        return lambda t: _false_if_null(
            t.by_number(lambda x: F.when(x.isNotNull(), F.lit(False)), F.isnan)
        )
    real = F.lit(float(number))
    exact = F.lit(int(number)) if _fits_int64(number) else None

    def whole(x: Column) -> Column:
        return op(x, exact) if exact is not None else op(x.cast("double"), real)

    return lambda t: _false_if_null(t.by_number(whole, lambda x: op(x, real)))


def equals(lit: QueryLiteral) -> Test:
    """Implicit equality `{field: lit}`: a regex literal matches strings instead."""
    if lit.kind == "regex":
        return regex_test(lit.value)
    return compare("$eq", lit)


def compare(op_name: str, lit: QueryLiteral) -> Test:
    """`$eq`, `$gt`, `$gte`, `$lt` or `$lte` with a literal (a regex matches nothing)."""
    op = COMPARISONS[op_name]
    if lit.kind == "null":
        # null sorts with missing, alone in its bracket: only the inclusive forms match.
        return Typed.is_nullish if op_name in INCLUSIVE else never
    if lit.kind == "number":
        return _numeric(op_name, lit.value)
    if lit.kind == "regex":
        return never
    if lit.kind == "date":
        operand = F.lit(lit.value)
        return lambda t: t.is_date() & _false_if_null(op(t.as_epoch_ms(), operand))
    if op_name == "$eq":
        text = _text(lit)
        read: Callable[[Typed], Column] = _json_text
        if lit.kind == "objectId":
            read = Typed.as_object_id
        return lambda t: _false_if_null(read(t) == text)
    return _ordering(op, lit)


def _ordering(op: Callable[[Column, Column], Column], lit: QueryLiteral) -> Test:
    if lit.kind == "string":
        operand = F.lit(lit.value)
        return lambda t: t.is_string() & _false_if_null(op(t.as_string(), operand))
    if lit.kind == "bool":
        flag = F.lit(lit.value)
        return lambda t: t.is_bool() & _false_if_null(op(t.json == "true", flag))
    in_bracket: Callable[[Typed], Column] = Typed.is_array
    read: Callable[[Typed], Column] = _json_text
    if lit.kind == "objectId":
        in_bracket, read = Typed.is_object_id, Typed.as_object_id
    elif lit.kind == "object":
        in_bracket = Typed.is_object
    text = _text(lit)
    return lambda t: in_bracket(t) & _false_if_null(op(read(t), text))


def _json_text(t: Typed) -> Column:
    return t.json


def in_list(lits: Sequence[QueryLiteral]) -> Test:
    """`$in`: equal to any literal, or matching any regex among them."""
    tests: list[Test] = [regex_test(lit.value) for lit in lits if lit.kind == "regex"]
    if any(lit.kind == "null" for lit in lits):
        tests.append(Typed.is_nullish)
    numbers = [lit.value for lit in lits if lit.kind == "number"]
    if numbers:
        tests.append(_number_in(numbers))
    dates = sorted({lit.value for lit in lits if lit.kind == "date"})
    if dates:
        tests.append(lambda t: t.is_date() & _false_if_null(t.as_epoch_ms().isin(*dates)))
    texts = [_text(lit) for lit in lits if lit.kind in _BY_TEXT and lit.kind != "objectId"]
    if texts:
        tests.append(lambda t: _false_if_null(t.json.isin(*texts)))
    ids = [_text(lit) for lit in lits if lit.kind == "objectId"]
    if ids:
        tests.append(lambda t: _false_if_null(t.as_object_id().isin(*ids)))
    return _any_of(tests)


def _number_in(numbers: list[float]) -> Test:
    whole = sorted({int(n) for n in numbers if _fits_int64(n)})
    finite = sorted({float(n) for n in numbers if not math.isnan(n)})
    has_nan = any(math.isnan(n) for n in numbers)

    def real(x: Column) -> Column:
        return (x.isin(*finite) | F.isnan(x)) if has_nan else x.isin(*finite)

    return lambda t: _false_if_null(t.by_number(lambda x: x.isin(*whole), real))


def _any_of(tests: list[Test]) -> Test:
    if not tests:
        return never

    def test(t: Typed) -> Column:
        result = tests[0](t)
        for extra in tests[1:]:
            result = result | extra(t)
        return result

    return test


def regex_test(regex: Regex) -> Test:
    """`$regex`: strings in which the pattern finds a match (unanchored, like PCRE)."""
    return lambda t: t.is_string() & _false_if_null(t.as_string().rlike(regex.java))


def type_test(names: Sequence[str]) -> Test:
    """`$type`: the value has any of the MQL types `names`."""
    return _any_of([_type_name_test(name) for name in names])


def _type_name_test(name: str) -> Test:
    return lambda t: t.is_type(name)


def size_test(size: int) -> Test:
    """`$size`: arrays of exactly `size` elements."""
    return lambda t: t.is_array() & _false_if_null(F.size(t.as_array()) == size)


def mod_test(divisor: int, remainder: int) -> Test:
    """`$mod`: numbers (truncated toward zero) whose remainder by `divisor` is `remainder`."""

    def whole(x: Column) -> Column:
        return x % F.lit(divisor) == remainder

    def real(x: Column) -> Column:
        # Casting truncates toward zero; a double beyond BIGINT (or NaN) casts to NULL.
        return whole(x.try_cast("bigint"))

    return lambda t: _false_if_null(t.by_number(whole, real))


def exists_test(t: Typed) -> Column:
    """`$exists: true`: the value is present (null counts as present)."""
    return ~t.is_missing()
