"""Unary math (`$abs $ceil $floor $sqrt $exp $ln $log10`, trigonometry) and `$round`/`$trunc`.

Integers pass through `$ceil`/`$floor` unchanged; doubles large enough to be integral already
are returned as is (Spark's `ceil` would overflow BIGINT). `$round` rounds half to even and
`$trunc` toward zero at a decimal place, in exact decimal arithmetic when the place is a
constant (as MongoDB does through Decimal128) and in double arithmetic when it is computed
per document.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.arithmetic import EXACT_DOUBLE, _args, _binary_numeric
from pipeline_stages._mql.ops.common import (
    ANY_NUMBER,
    Arg,
    Ctx,
    errors_of,
    kind_text,
    placeholder,
    result,
    when_all,
)
from pipeline_stages._mql.ops.messages import message, number_text
from pipeline_stages._mql.scope import Expr


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
        return F.when(a.kind_in(K.INTEGRAL_TYPES), a.value).otherwise(V.from_double(rounded))

    return compute


def _abs(a: Arg) -> Column:
    as_long = V.as_long(a.value, a.k)
    return F.when(a.kind_in(K.INTEGRAL_TYPES), V.from_long(F.abs(as_long))).otherwise(
        V.from_double(F.abs(V.as_double(a.value, a.k)))
    )


def _abs_check(a: Arg) -> tuple[Column, Column]:
    too_small = a.kind_in(K.INTEGRAL_TYPES) & (V.as_long(a.value, a.k) == F.lit(-(2**63)))
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
    return F.when(num.kind_in(K.INTEGRAL_TYPES), integral).otherwise(V.from_double(as_double))


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
        num.kind_in(K.INTEGRAL_TYPES), integral if n is not None else num.value
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
    "$abs": _unary_numeric(_abs, _abs_check),
    "$ceil": _unary_numeric(_integral_passthrough(F.ceil)),
    "$floor": _unary_numeric(_integral_passthrough(F.floor)),
    "$round": round_,
    "$trunc": trunc,
    "$sqrt": _unary_numeric(_double_fn(F.sqrt), _non_negative, kinds={"double", "null"}),
    "$exp": _unary_numeric(_double_fn(F.exp), kinds={"double", "null"}),
    "$ln": _unary_numeric(_double_fn(F.ln), _positive("$ln"), kinds={"double", "null"}),
    "$log10": _unary_numeric(_double_fn(F.log10), _positive("$log10"), kinds={"double", "null"}),
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
