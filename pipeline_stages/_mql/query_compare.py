"""Value tests: one query operator applied to one value (no paths, no array expansion).

Each builder returns a `Test`, a function from a `Typed` value to a non-NULL BOOLEAN column.
Query comparisons are type-bracketed: `{$gt: 5}` only ever matches numbers, `{$lt: "m"}`
only strings, and so on; numbers of any width compare by value (`1 == 1.0`). Objects and
arrays compare by their JSON text, which agrees with BSON on equality of equal documents but
is field-order-insensitive (VARIANT sorts keys) and tells `1` from `1.0` inside them.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql.query_literals import QueryLiteral, Regex, literal_json_column
from pipeline_stages._mql.query_values import Typed

Test = Callable[[Typed], Column]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

COMPARISONS: dict[str, Callable[[Column, Column], Column]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}

#: How to read each kind of literal out of a value of the same type bracket.
_BRACKETS: dict[str, tuple[Callable[[Typed], Column], Callable[[Typed], Column]]] = {
    "string": (Typed.is_string, Typed.as_string),
    "bool": (Typed.is_bool, Typed.as_bool),
    "date": (Typed.is_date, Typed.as_epoch_ms),
    "objectId": (Typed.is_object_id, Typed.as_object_id),
    "object": (Typed.is_object, Typed.as_json),
    "array": (Typed.is_array, Typed.as_json),
}


def never(_: Typed) -> Column:
    """The test that matches nothing."""
    return F.lit(False)


def _operand(lit: QueryLiteral) -> Column:
    if lit.kind in ("object", "array"):
        return literal_json_column(lit.value)
    return F.lit(lit.value)


def _fits_int64(number: float) -> bool:
    return math.isfinite(number) and float(number).is_integer() and INT64_MIN <= number <= INT64_MAX


def _numeric(op: Callable[[Column, Column], Column], number: float) -> Test:
    """Compare numbers exactly: integers as BIGINT when both sides are whole, else DOUBLE."""
    if math.isnan(number):
        # NaN equals only NaN and orders below every number (documents rarely hold one).
        if op(0, 0) is not True:
            return never
        return lambda t: F.coalesce(t.by_number(lambda _: F.lit(False), F.isnan), F.lit(False))
    real = F.lit(float(number))
    if _fits_int64(number):
        exact = F.lit(int(number))
        return lambda t: F.coalesce(
            t.by_number(lambda x: op(x, exact), lambda x: op(x, real)), F.lit(False)
        )
    return lambda t: F.coalesce(
        t.by_number(lambda x: op(x.cast("double"), real), lambda x: op(x, real)), F.lit(False)
    )


def equals(lit: QueryLiteral) -> Test:
    """`$eq` (and implicit equality) with a literal."""
    if lit.kind == "null":
        return Typed.is_nullish
    if lit.kind == "regex":
        return regex_test(lit.value)
    return compare("$eq", lit)


def compare(op_name: str, lit: QueryLiteral) -> Test:
    """`$eq`, `$gt`, `$gte`, `$lt` or `$lte` with a literal (regex operands excluded)."""
    op = operator.eq if op_name == "$eq" else COMPARISONS[op_name]
    if lit.kind == "null":
        # null sorts with missing, alone in its bracket: only the inclusive forms match.
        return Typed.is_nullish if op(0, 0) is True else never
    if lit.kind == "number":
        return _numeric(op, lit.value)
    if lit.kind == "regex":
        return never
    in_bracket, extract = _BRACKETS[lit.kind]
    operand = _operand(lit)
    return lambda t: in_bracket(t) & F.coalesce(op(extract(t), operand), F.lit(False))


def in_list(lits: Sequence[QueryLiteral]) -> Test:
    """`$in`: equal to any literal, or matching any regex among them."""
    tests: list[Test] = [regex_test(lit.value) for lit in lits if lit.kind == "regex"]
    if any(lit.kind == "null" for lit in lits):
        tests.append(Typed.is_nullish)
    numbers = [lit.value for lit in lits if lit.kind == "number"]
    if numbers:
        tests.append(_number_in(numbers))
    for kind, (in_bracket, extract) in _BRACKETS.items():
        operands = [_operand(lit) for lit in lits if lit.kind == kind]
        if operands:
            tests.append(_member(in_bracket, extract, operands))
    return _any_of(tests)


def _member(
    in_bracket: Callable[[Typed], Column],
    extract: Callable[[Typed], Column],
    operands: list[Column],
) -> Test:
    return lambda t: in_bracket(t) & F.coalesce(extract(t).isin(*operands), F.lit(False))


def _number_in(numbers: list[float]) -> Test:
    whole = sorted({int(n) for n in numbers if _fits_int64(n)})
    finite = sorted({float(n) for n in numbers if not math.isnan(n)})
    has_nan = any(math.isnan(n) for n in numbers)

    def real(x: Column) -> Column:
        return (x.isin(*finite) | F.isnan(x)) if has_nan else x.isin(*finite)

    return lambda t: F.coalesce(t.by_number(lambda x: x.isin(*whole), real), F.lit(False))


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
    return lambda t: t.is_string() & F.coalesce(t.as_string().rlike(regex.java), F.lit(False))


def type_test(names: Sequence[str]) -> Test:
    """`$type`: the value has any of the MQL types `names`."""
    return _any_of([lambda t, name=name: t.is_type(name) for name in names])


def size_test(size: int) -> Test:
    """`$size`: arrays of exactly `size` elements."""
    return lambda t: t.is_array() & F.coalesce(F.size(t.as_array()) == size, F.lit(False))


def mod_test(divisor: int, remainder: int) -> Test:
    """`$mod`: numbers (truncated toward zero) whose remainder by `divisor` is `remainder`."""

    def whole(x: Column) -> Column:
        return x % F.lit(divisor) == remainder

    def real(x: Column) -> Column:
        # Casting truncates toward zero; a double beyond BIGINT (or NaN) casts to NULL.
        return whole(x.try_cast("bigint"))

    return lambda t: F.coalesce(t.by_number(whole, real), F.lit(False))


def exists_test(t: Typed) -> Column:
    """`$exists: true`: the value is present (null counts as present)."""
    return ~t.is_missing()
