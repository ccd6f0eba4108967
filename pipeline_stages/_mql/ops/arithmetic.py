"""Binary and n-ary arithmetic: `$add $subtract $multiply $divide $mod $pow $log`.

Integral results stay integral (an int when the value fits in 32 bits, else a long) and fall
back to double when int64 arithmetic overflows, as MongoDB does. `$add`/`$subtract` accept
dates. Decimals are computed as doubles (see `expressions.py`). A null or missing operand
makes the result null, except where an operand met earlier is of a wrong type.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    ANY_NUMBER,
    Arg,
    Ctx,
    errors_of,
    kind_text,
    null_if_nullish,
    placeholder,
    positional,
    result,
    when_all,
)
from pipeline_stages._mql.ops.messages import message, number_text
from pipeline_stages._mql.scope import Expr

FLOATING = ("double", "decimal")
#: Doubles at least this large are integers already; `ceil`/`floor` on them overflow BIGINT.
EXACT_DOUBLE = 2.0**52


def _args(ctx: Ctx, min_n: int, max_n: int | None = None) -> list[Arg] | None:
    compiled = positional(ctx, min_n, max_n)
    return None if compiled is None else [ctx.arg(e) for e in compiled]


def _sequential_type_error(args: list[Arg], allowed: Collection[str], prefix: str) -> Column | None:
    """MongoDB's left-to-right check: a null operand stops it; a wrong type errors."""
    if all(a.static is not None and a.static in allowed for a in args):
        return None
    pairs = []
    for a in args:
        pairs.append((a.nullish, F.lit(None).cast("string")))
        pairs.append((~a.kind_in(allowed), message(prefix, kind_text(a))))
    return when_all(pairs)


def _any(args: list[Arg], names: tuple[str, ...]) -> Column:
    out = F.lit(False)
    for a in args:
        out = out | a.kind_in(names)
    return out


def _integral_or_double(long_value: Column, double_value: Column) -> Column:
    return F.coalesce(V.from_long(long_value), V.from_double(double_value))


def _round_to_long(a: Arg) -> Column:
    """An operand added to a date: integral values as is, doubles rounded half away from 0."""
    rounded = F.round(V.as_double(a.value, a.k)).try_cast("bigint")
    return F.when(a.kind_in(K.INTEGRAL_TYPES), V.as_long(a.value, a.k)).otherwise(rounded)


def _numeric_kinds(args: list[Arg]) -> set[str] | None:
    if any(a.static is None for a in args):
        return None
    if any(a.static in FLOATING for a in args):
        return {"double"}
    return {"int", "long", "double"}


def add(ctx: Ctx) -> Expr:
    """`$add`: numbers, and at most one date."""
    args = _args(ctx, 0)
    if args is None:
        return placeholder()
    if not args:
        return result(V.from_long(F.lit(0)), kinds={"int"})
    type_error = _sequential_type_error(
        args, (*ANY_NUMBER, "date"), "$add only supports numeric or date types, not "
    )
    dates = sum((a.kind_in(("date",)).cast("int") for a in args), F.lit(0))
    date_error = F.when(dates > 1, F.lit("only one date allowed in an $add expression"))
    long_sum = V.as_long(args[0].value, args[0].k)
    double_sum = V.as_double(args[0].value, args[0].k)
    for a in args[1:]:
        long_sum = F.try_add(long_sum, V.as_long(a.value, a.k))
        double_sum = double_sum + V.as_double(a.value, a.k)
    date_total = F.lit(0).cast("bigint")
    for a in args:
        part = F.when(a.kind_in(("date",)), V.as_epoch_ms(a.value, "date")).otherwise(
            _round_to_long(a)
        )
        date_total = F.try_add(date_total, part)
    date_total = ctx.bind(date_total)
    any_date, any_double = _any(args, ("date",)), _any(args, FLOATING)
    out_of_range = date_total.isNull() | ~date_total.between(V.MIN_DATE_MS, V.MAX_DATE_MS)
    overflow = F.when(any_date & out_of_range, F.lit("date overflow"))
    number = F.when(any_double, V.from_double(double_sum)).otherwise(
        _integral_or_double(long_sum, double_sum)
    )
    value = null_if_nullish(args, F.when(any_date, V.from_epoch_ms(date_total)).otherwise(number))
    own = (
        F.coalesce(type_error, date_error, overflow)
        if type_error is not None
        else F.coalesce(date_error, overflow)
    )
    kinds = _numeric_kinds(args)
    return result(value, *errors_of(args), own=own, kinds=kinds)


def subtract(ctx: Ctx) -> Expr:
    """`$subtract`: numbers, date minus number (a date), date minus date (milliseconds)."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    lhs, rhs = args
    both_numbers = lhs.kind_in(ANY_NUMBER) & rhs.kind_in(ANY_NUMBER)
    both_integral = lhs.kind_in(K.INTEGRAL_TYPES) & rhs.kind_in(K.INTEGRAL_TYPES)
    ld, rd = V.as_double(lhs.value, lhs.k), V.as_double(rhs.value, rhs.k)
    long_diff = F.try_subtract(V.as_long(lhs.value, lhs.k), V.as_long(rhs.value, rhs.k))
    numeric = F.when(both_integral, _integral_or_double(long_diff, ld - rd)).otherwise(
        V.from_double(ld - rd)
    )
    lhs_ms = V.as_epoch_ms(lhs.value, "date")
    rhs_is_date = rhs.kind_in(("date",))
    date_minus = F.try_subtract(lhs_ms, _round_to_long(rhs))
    date_value = F.when(
        rhs_is_date, V.from_long(lhs_ms - V.as_epoch_ms(rhs.value, "date"))
    ).otherwise(V.from_epoch_ms(date_minus))
    lhs_date = lhs.kind_in(("date",))
    value = when_all(
        [(both_numbers, numeric), (lhs.nullish | rhs.nullish, V.null()), (lhs_date, date_value)]
    )
    own = when_all(
        [
            (both_numbers | lhs.nullish | rhs.nullish, F.lit(None).cast("string")),
            (
                lhs_date & ~rhs_is_date & ~rhs.kind_in(ANY_NUMBER),
                message("can't $subtract ", kind_text(rhs), " from Date"),
            ),
            (
                lhs_date
                & ~rhs_is_date
                & (date_minus.isNull() | ~date_minus.between(V.MIN_DATE_MS, V.MAX_DATE_MS)),
                F.lit("date overflow"),
            ),
            (~lhs_date, message("can't $subtract ", kind_text(rhs), " from ", kind_text(lhs))),
        ]
    )
    return result(value, lhs.error, rhs.error, own=own, kinds=_numeric_kinds(args))


def multiply(ctx: Ctx) -> Expr:
    """`$multiply`: product of numbers."""
    args = _args(ctx, 0)
    if args is None:
        return placeholder()
    if not args:
        return result(V.from_long(F.lit(1)), kinds={"int"})
    type_error = _sequential_type_error(
        args, ANY_NUMBER, "$multiply only supports numeric types, not "
    )
    long_product = V.as_long(args[0].value, args[0].k)
    double_product = V.as_double(args[0].value, args[0].k)
    for a in args[1:]:
        long_product = F.try_multiply(long_product, V.as_long(a.value, a.k))
        double_product = double_product * V.as_double(a.value, a.k)
    number = F.when(_any(args, FLOATING), V.from_double(double_product)).otherwise(
        _integral_or_double(long_product, double_product)
    )
    return result(
        null_if_nullish(args, number), *errors_of(args), own=type_error, kinds=_numeric_kinds(args)
    )


def _binary_numeric(ctx: Ctx) -> tuple[Arg, Arg, Column] | None:
    args = _args(ctx, 2, 2)
    if args is None:
        return None
    lhs, rhs = args
    return lhs, rhs, lhs.kind_in(ANY_NUMBER) & rhs.kind_in(ANY_NUMBER)


def _binary_type_error(ctx: Ctx, lhs: Arg, rhs: Arg, both: Column) -> Column:
    text = f"{ctx.op} only supports numeric types, not "
    return F.when(
        ~both & ~lhs.nullish & ~rhs.nullish, message(text, kind_text(lhs), " and ", kind_text(rhs))
    )


def divide(ctx: Ctx) -> Expr:
    """`$divide`: always a double."""
    parsed = _binary_numeric(ctx)
    if parsed is None:
        return placeholder()
    lhs, rhs, both = parsed
    denominator = V.as_double(rhs.value, rhs.k)
    quotient = F.try_divide(V.as_double(lhs.value, lhs.k), denominator)
    zero = F.when(both & (denominator == 0), F.lit("can't $divide by zero"))
    own = F.coalesce(zero, _binary_type_error(ctx, lhs, rhs, both))
    value = F.when(both, V.from_double(quotient)).otherwise(V.null())
    return result(value, lhs.error, rhs.error, own=own, kinds={"double", "null"})


def mod(ctx: Ctx) -> Expr:
    """`$mod`: remainder with the sign of the dividend."""
    parsed = _binary_numeric(ctx)
    if parsed is None:
        return placeholder()
    lhs, rhs, both = parsed
    ld, rd = V.as_double(lhs.value, lhs.k), V.as_double(rhs.value, rhs.k)
    integral = lhs.kind_in(K.INTEGRAL_TYPES) & rhs.kind_in(K.INTEGRAL_TYPES)
    long_mod = F.try_mod(V.as_long(lhs.value, lhs.k), V.as_long(rhs.value, rhs.k))
    number = F.when(integral, V.from_long(long_mod)).otherwise(V.from_double(F.try_mod(ld, rd)))
    zero = F.when(both & (rd == 0), F.lit("can't $mod by zero"))
    own = F.coalesce(zero, _binary_type_error(ctx, lhs, rhs, both))
    return result(F.when(both, number).otherwise(V.null()), lhs.error, rhs.error, own=own)


def log(ctx: Ctx) -> Expr:
    """`$log`: logarithm in an arbitrary base."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    num, base = args
    x, b = V.as_double(num.value, num.k), V.as_double(base.value, base.k)
    nullish = num.nullish | base.nullish
    own = when_all(
        [
            (nullish, F.lit(None).cast("string")),
            (
                ~num.kind_in(ANY_NUMBER),
                message("$log's argument must be numeric, not ", kind_text(num)),
            ),
            (
                ~base.kind_in(ANY_NUMBER),
                message("$log's base must be numeric, not ", kind_text(base)),
            ),
            (
                ~((x > 0) | F.isnan(x)),
                message("$log's argument must be a positive number, but is ", number_text(x)),
            ),
            (
                ~(((b > 0) & (b != 1)) | F.isnan(b)),
                message(
                    "$log's base must be a positive number not equal to 1, but is ", number_text(b)
                ),
            ),
        ]
    )
    value = F.when(nullish, V.null()).otherwise(V.from_double(F.try_divide(F.log(x), F.log(b))))
    return result(value, num.error, base.error, own=own, kinds={"double", "null"})


def _exact_power(base: Column, exponent: Column) -> Column:
    """base^exponent by repeated multiplication; NULL when it overflows int64."""
    steps = F.sequence(F.lit(1), exponent.cast("int"))
    return F.aggregate(steps, F.lit(1).cast("bigint"), lambda acc, _: F.try_multiply(acc, base))


def pow_(ctx: Ctx) -> Expr:
    """`$pow`: integral when both operands are and the result fits, else double."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    base, exp = args
    b, e = V.as_double(base.value, base.k), V.as_double(exp.value, exp.k)
    nullish = base.nullish | exp.nullish
    own = when_all(
        [
            (nullish, F.lit(None).cast("string")),
            (
                ~base.kind_in(ANY_NUMBER),
                message("$pow's base must be numeric, not ", kind_text(base)),
            ),
            (
                ~exp.kind_in(ANY_NUMBER),
                message("$pow's exponent must be numeric, not ", kind_text(exp)),
            ),
            ((b == 0) & (e < 0), F.lit("$pow cannot take a base of 0 and a negative exponent")),
        ]
    )
    power = F.pow(b, e)
    bl, el = V.as_long(base.value, base.k), V.as_long(exp.value, exp.k)
    integral = base.kind_in(K.INTEGRAL_TYPES) & exp.kind_in(K.INTEGRAL_TYPES)
    small = (F.abs(power) < 2.0**53) & (el >= 0)
    unit_base = F.when(bl == 1, F.lit(1)).when(
        bl == -1, F.when(el % 2 == 0, F.lit(1)).otherwise(F.lit(-1))
    )
    exact = when_all(
        [
            (F.abs(bl) == 1, unit_base.cast("bigint")),
            (small, power.try_cast("bigint")),
            ((el >= 0) & (el <= 63), _exact_power(bl, el)),
        ]
    )
    number = F.when(integral & exact.isNotNull(), V.from_long(exact)).otherwise(
        V.from_double(power)
    )
    return result(F.when(nullish, V.null()).otherwise(number), base.error, exp.error, own=own)


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$add": add,
    "$subtract": subtract,
    "$multiply": multiply,
    "$divide": divide,
    "$mod": mod,
    "$pow": pow_,
    "$log": log,
}
