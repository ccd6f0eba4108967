"""Arithmetic operators: `$add $subtract $multiply $divide $mod $pow $log` and unary math.

Integral results stay integral (an int when the value fits in 32 bits, else a long) and fall
back to double when int64 arithmetic overflows, as MongoDB does. `$add`/`$subtract` accept
dates. Decimals are computed as doubles (see `expressions.py`). A null or missing operand
makes the result null, except where an operand met earlier is of a wrong type.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops_common import (
    ANY_NUMBER,
    Arg,
    Ctx,
    errors_of,
    kind_text,
    message,
    null_if_nullish,
    number_text,
    placeholder,
    positional,
    result,
    when_all,
)
from pipeline_stages._mql.scope import Expr

FLOATING = ("double", "decimal")
#: Doubles at least this large are integers already; `ceil`/`floor` on them overflow BIGINT.
EXACT_DOUBLE = 2.0**52


def _args(ctx: Ctx, min_n: int, max_n: int | None = None) -> list[Arg] | None:
    compiled = positional(ctx, min_n, max_n)
    return None if compiled is None else [ctx.arg(e) for e in compiled]


def _sequential_type_error(args: list[Arg], allowed: tuple[str, ...], prefix: str) -> Column | None:
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
    return F.when(a.kind_in(V.INTEGRAL_TYPES), V.as_long(a.value, a.k)).otherwise(rounded)


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
    overflow = F.when(any_date & date_total.isNull(), F.lit("date overflow"))
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
    both_integral = lhs.kind_in(V.INTEGRAL_TYPES) & rhs.kind_in(V.INTEGRAL_TYPES)
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
            (lhs_date & ~rhs_is_date & date_minus.isNull(), F.lit("date overflow")),
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
    integral = lhs.kind_in(V.INTEGRAL_TYPES) & rhs.kind_in(V.INTEGRAL_TYPES)
    long_mod = F.try_mod(V.as_long(lhs.value, lhs.k), V.as_long(rhs.value, rhs.k))
    number = F.when(integral, V.from_long(long_mod)).otherwise(V.from_double(F.try_mod(ld, rd)))
    zero = F.when(both & (rd == 0), F.lit("can't $mod by zero"))
    own = F.coalesce(zero, _binary_type_error(ctx, lhs, rhs, both))
    return result(F.when(both, number).otherwise(V.null()), lhs.error, rhs.error, own=own)


def _unary(ctx: Ctx) -> Arg | None:
    args = _args(ctx, 1, 1)
    return None if args is None else args[0]


def _unary_numeric(
    compute: Callable[[Arg], Column],
    check: Callable[[Arg], tuple[Column, Column]] | None = None,
    kinds: set[str] | None = None,
) -> Callable[[Ctx], Expr]:
    """An operator of one numeric argument; `check(arg)` may return (bad, message)."""

    def compile_op(ctx: Ctx) -> Expr:
        a = _unary(ctx)
        if a is None:
            return placeholder()
        is_number = a.kind_in(ANY_NUMBER)
        own = F.when(
            ~is_number & ~a.nullish,
            message(f"{ctx.op} only supports numeric types, not ", kind_text(a)),
        )
        if check is not None:
            bad, text = check(a)
            own = F.coalesce(own, F.when(is_number & bad, text))
        value = F.when(is_number, compute(a)).otherwise(V.null())
        return result(value, a.error, own=own, kinds=kinds)

    return compile_op


def _double_fn(fn: Callable[[Column], Column]) -> Callable[[Arg], Column]:
    return lambda a: V.from_double(fn(V.as_double(a.value, a.k)))


def _integral_passthrough(fn: Callable[[Column], Column]) -> Callable[[Arg], Column]:
    """Integers unchanged; doubles through `fn` unless already integral (huge)."""

    def compute(a: Arg) -> Column:
        x = V.as_double(a.value, a.k)
        rounded = F.when(F.abs(x) < EXACT_DOUBLE, fn(x).cast("double")).otherwise(x)
        return F.when(a.kind_in(V.INTEGRAL_TYPES), a.value).otherwise(V.from_double(rounded))

    return compute


def _abs(a: Arg) -> Column:
    as_long = V.as_long(a.value, a.k)
    return F.when(a.kind_in(V.INTEGRAL_TYPES), V.from_long(F.abs(as_long))).otherwise(
        V.from_double(F.abs(V.as_double(a.value, a.k)))
    )


def _abs_check(a: Arg) -> tuple[Column, Column]:
    too_small = a.kind_in(V.INTEGRAL_TYPES) & (V.as_long(a.value, a.k) == F.lit(-(2**63)))
    return too_small, F.lit("can't take $abs of long long min")


def _positive(op: str) -> Callable[[Arg], tuple[Column, Column]]:
    def check(a: Arg) -> tuple[Column, Column]:
        x = V.as_double(a.value, a.k)
        return ~((x > 0) | F.isnan(x)), message(
            f"{op}'s argument must be a positive number, but is ", number_text(x)
        )

    return check


def _non_negative(a: Arg) -> tuple[Column, Column]:
    return V.as_double(a.value, a.k) < 0, F.lit(
        "$sqrt's argument must be greater than or equal to 0"
    )


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
    integral = base.kind_in(V.INTEGRAL_TYPES) & exp.kind_in(V.INTEGRAL_TYPES)
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


def _round_or_trunc(ctx: Ctx, *, truncate: bool) -> Expr:
    args = _args(ctx, 1, 2)
    if args is None:
        return placeholder()
    num = args[0]
    place = args[1] if len(args) > 1 else None
    nullish = num.nullish | (place.nullish if place is not None else F.lit(False))
    checks = [(nullish, F.lit(None).cast("string"))]
    checks.append(
        (
            ~num.kind_in(ANY_NUMBER),
            message(f"{ctx.op} only supports numeric types, not ", kind_text(num)),
        )
    )
    if place is None or (
        place.is_const
        and isinstance(place.const, int)
        and not isinstance(place.const, bool)
        and -20 <= place.const <= 100
    ):
        digits = 0 if place is None else place.const
        value = _round_static(num, digits, truncate)
    else:
        p = V.as_whole_number(place.value, place.k)
        checks.append(
            (p.isNull(), F.lit(f"precision argument to  {ctx.op} must be a integral value"))
        )
        checks.append(
            (
                (p < -20) | (p > 100),
                message(
                    f"cannot apply {ctx.op} with precision value ",
                    p.cast("string"),
                    " value must be in [-20, 100]",
                ),
            )
        )
        value = _round_dynamic(num, p, truncate)
    return result(
        F.when(nullish, V.null()).otherwise(value), *errors_of(args), own=when_all(checks)
    )


def _toward_zero(x: Column, digits: int) -> Column:
    """Truncate a double at `digits` decimal places, exactly (via decimals)."""
    scaled = F.when(x >= 0, F.floor(x, F.lit(digits))).otherwise(F.ceil(x, F.lit(digits)))
    return F.when(F.abs(x) < 1e15, scaled.cast("double")).otherwise(x)


def _round_static(num: Arg, digits: int, truncate: bool) -> Column:
    """Round/truncate with a constant number of decimal places (exact decimal arithmetic)."""
    x = V.as_double(num.value, num.k)
    if digits > 15:
        as_double = x  # a double has no more digits to drop
    elif truncate:
        as_double = _toward_zero(x, digits)
    else:
        as_double = F.bround(x, digits)
    if digits >= 0:
        integral = num.value
    else:
        n = V.as_long(num.value, num.k)
        scale = 10 ** (-digits)
        rounded = F.try_subtract(n, F.try_mod(n, F.lit(scale))) if truncate else F.bround(n, digits)
        integral = V.from_long(F.coalesce(rounded, F.lit(0)))
    return F.when(num.kind_in(V.INTEGRAL_TYPES), integral).otherwise(V.from_double(as_double))


def _round_dynamic(num: Arg, p: Column, truncate: bool) -> Column:
    """Round/truncate with a per-document number of places (double arithmetic)."""
    x = V.as_double(num.value, num.k)
    factor = F.pow(F.lit(10.0), p)
    scaled = x * factor
    whole = (
        F.when(scaled >= 0, F.floor(scaled)).otherwise(F.ceil(scaled))
        if truncate
        else F.bround(scaled, 0)
    )
    as_double = F.when(
        F.abs(scaled) < EXACT_DOUBLE, F.try_divide(whole.cast("double"), factor)
    ).otherwise(x)
    n = V.as_long(num.value, num.k)
    integral = F.when(p >= 0, num.value).otherwise(
        V.from_long((F.try_divide(whole.cast("double"), factor)).try_cast("bigint"))
    )
    return F.when(
        num.kind_in(V.INTEGRAL_TYPES), integral if n is not None else num.value
    ).otherwise(V.from_double(as_double))


def round_(ctx: Ctx) -> Expr:
    """`$round`: half to even, at a decimal place."""
    return _round_or_trunc(ctx, truncate=False)


def trunc(ctx: Ctx) -> Expr:
    """`$trunc`: toward zero, at a decimal place."""
    return _round_or_trunc(ctx, truncate=True)


def _bounded(op: str, low: float, high: float) -> Callable[[Arg], tuple[Column, Column]]:
    """Domain check; infinite bounds are open (`$sin` of infinity is an error)."""
    lo_open, hi_open = low == float("-inf"), high == float("inf")

    def check(a: Arg) -> tuple[Column, Column]:
        x = V.as_double(a.value, a.k)
        bad = ((x <= low) if lo_open else (x < low)) | ((x >= high) if hi_open else (x > high))
        interval = f"{'(' if lo_open else '['}{_fmt(low)},{_fmt(high)}{')' if hi_open else ']'}"
        return bad & ~F.isnan(x), message(
            f"cannot apply {op} to ", number_text(x), f", value must in {interval}"
        )

    return check


def _fmt(bound: float) -> str:
    if bound in (float("inf"), float("-inf")):
        return "inf" if bound > 0 else "-inf"
    return str(int(bound)) if bound == int(bound) else str(bound)


def _trig(
    fn: Callable[[Column], Column], op: str, bounds: tuple[float, float] | None = None
) -> Callable[[Ctx], Expr]:
    check = _bounded(op, *bounds) if bounds else None
    return _unary_numeric(_double_fn(fn), check, kinds={"double", "null"})


def atan2(ctx: Ctx) -> Expr:
    """`$atan2`."""
    parsed = _binary_numeric(ctx)
    if parsed is None:
        return placeholder()
    y, x, both = parsed
    own = F.when(
        ~both & ~y.nullish & ~x.nullish,
        message("$atan2 only supports numeric types, not ", kind_text(y), " and ", kind_text(x)),
    )
    value = F.when(
        both, V.from_double(F.atan2(V.as_double(y.value, y.k), V.as_double(x.value, x.k)))
    ).otherwise(V.null())
    return result(value, y.error, x.error, own=own, kinds={"double", "null"})


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$add": add,
    "$subtract": subtract,
    "$multiply": multiply,
    "$divide": divide,
    "$mod": mod,
    "$abs": _unary_numeric(_abs, _abs_check),
    "$ceil": _unary_numeric(_integral_passthrough(F.ceil)),
    "$floor": _unary_numeric(_integral_passthrough(F.floor)),
    "$round": round_,
    "$trunc": trunc,
    "$pow": pow_,
    "$sqrt": _unary_numeric(_double_fn(F.sqrt), _non_negative, kinds={"double", "null"}),
    "$exp": _unary_numeric(_double_fn(F.exp), kinds={"double", "null"}),
    "$ln": _unary_numeric(_double_fn(F.ln), _positive("$ln"), kinds={"double", "null"}),
    "$log10": _unary_numeric(_double_fn(F.log10), _positive("$log10"), kinds={"double", "null"}),
    "$log": log,
    "$sin": _trig(F.sin, "$sin", (float("-inf"), float("inf"))),
    "$cos": _trig(F.cos, "$cos", (float("-inf"), float("inf"))),
    "$tan": _trig(F.tan, "$tan", (float("-inf"), float("inf"))),
    "$asin": _trig(F.asin, "$asin", (-1.0, 1.0)),
    "$acos": _trig(F.acos, "$acos", (-1.0, 1.0)),
    "$atan": _trig(F.atan, "$atan"),
    "$sinh": _trig(F.sinh, "$sinh"),
    "$cosh": _trig(F.cosh, "$cosh"),
    "$tanh": _trig(F.tanh, "$tanh"),
    "$asinh": _trig(F.asinh, "$asinh"),
    "$acosh": _trig(F.acosh, "$acosh", (1.0, float("inf"))),
    "$atanh": _trig(F.atanh, "$atanh", (-1.0, 1.0)),
    "$atan2": atan2,
    "$degreesToRadians": _trig(F.radians, "$degreesToRadians"),
    "$radiansToDegrees": _trig(F.degrees, "$radiansToDegrees"),
}
