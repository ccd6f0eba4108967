"""`$literal`, `$let`, `$meta`, the Atlas extras `$currentDate`/`$createUUID`, and the
array forms of `$sum`, `$avg`, `$min`, `$max`.

`{$meta: "stream.<path>"}` reads the stream metadata object (`Scope.meta`); any other `$meta`
keyword (`textScore`, `searchScore`, ...) is `unsupported_option`. `$currentDate` reads the
JVM wall clock for each evaluation; `$createUUID` uses Spark's `uuid()` (a random UUID string,
recomputed if Spark re-evaluates the expression).

`$sum`/`$avg` ignore non-numeric values; `$min`/`$max` ignore null and missing and compare in
MQL order. With one argument they work on its elements when it is an array; with several, on
the arguments.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import order as O
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Ctx,
    constant,
    errors_of,
    placeholder,
    positional,
    result,
    valid_variable_name,
    with_kind,
)
from pipeline_stages._mql.ops.paths import get_path
from pipeline_stages._mql.scope import Expr


def literal(ctx: Ctx) -> Expr:
    """`$literal`: the argument, unevaluated."""
    return constant(ctx.spec)


def let(ctx: Ctx) -> Expr:
    """`$let`: `{vars: {name: <expr>}, in: <expr>}`."""
    spec = ctx.spec
    if not isinstance(spec, dict):
        return ctx.fail("$let only supports an object as its argument")
    for key in spec:
        if key not in ("vars", "in"):
            return ctx.fail(f"Unrecognized parameter to $let: {key}", key)
    if "vars" not in spec:
        return ctx.fail("Missing 'vars' parameter to $let")
    if "in" not in spec:
        return ctx.fail("Missing 'in' parameter to $let")
    if not isinstance(spec["vars"], dict):
        return ctx.fail("$let's 'vars' must be an object", "vars")
    bound: dict[str, Column] = {}
    errors = []
    for name, sub in spec["vars"].items():
        if name != "CURRENT" and not valid_variable_name(ctx, name, "vars", name):
            continue
        used = ctx.use(ctx.sub(sub, "vars", name))
        bound[name] = used.value
        errors.append(used.error)
    body = ctx.sub(spec["in"], "in", scope=ctx.scope.with_variables(**bound))
    return result(body.value, *errors, body.error, kinds=body.kinds)


def meta(ctx: Ctx) -> Expr:
    """`$meta`: `"stream"` or `"stream.<path>"` from the stream metadata."""
    if not isinstance(ctx.spec, str):
        return ctx.fail("$meta only supports string arguments")
    names = ctx.spec.split(".")
    if names[0] != "stream":
        return ctx.unsupported(
            f"Unsupported argument to $meta: {ctx.spec} (Sluice supports 'stream' paths)"
        )
    if not all(names[1:]):
        return ctx.fail(f"invalid $meta path: {ctx.spec}")
    value = ctx.scope.meta if len(names) == 1 else get_path(ctx.scope.meta, names[1:])
    return Expr(value=value)


def current_date(ctx: Ctx) -> Expr:
    """`$currentDate`: the wall-clock time of this evaluation."""
    if ctx.spec not in ({}, [], None):
        return ctx.fail("$currentDate takes no arguments")
    millis = F.call_function("reflect", F.lit("java.lang.System"), F.lit("currentTimeMillis"))
    return result(V.from_epoch_ms(millis.cast("bigint")), kinds={"date"})


def create_uuid(ctx: Ctx) -> Expr:
    """`$createUUID`: a random UUID string."""
    if ctx.spec not in ({}, [], None):
        return ctx.fail("$createUUID takes no arguments")
    return result(V.from_string(F.expr("uuid()")), kinds={"string"})


def _elements(ctx: Ctx) -> tuple[Column, list[Column | None]] | None:
    compiled = positional(ctx, 0)
    if compiled is None:
        return None
    args = [ctx.arg(e) for e in compiled]
    if len(args) == 1:
        a = args[0]
        items = F.when(a.kind_in(("array",)), V.as_array(a.value, a.k)).otherwise(F.array(a.value))
    else:
        items = F.array(*[a.value for a in args]) if args else F.array().cast("array<variant>")
    return ctx.bind(items), errors_of(args)


def _sum_avg(ctx: Ctx) -> Expr:
    parsed = _elements(ctx)
    if parsed is None:
        return placeholder()
    items, errors = parsed
    numbers = ctx.bind(F.filter(items, lambda e: K.kind_of(e).isin(*K.NUMERIC_TYPES)))
    any_float = F.exists(numbers, lambda e: K.kind_of(e).isin("double", "decimal"))
    long_sum = F.aggregate(
        numbers, F.lit(0).cast("bigint"), lambda acc, e: F.try_add(acc, V.as_long(e))
    )
    double_sum = F.aggregate(numbers, F.lit(0.0), lambda acc, e: acc + V.as_double(e))
    if ctx.op == "$avg":
        count = F.size(numbers)
        value = F.when(count == 0, V.null()).otherwise(
            V.from_double(F.try_divide(double_sum, count))
        )
        return result(value, *errors, kinds={"double", "null"})
    total = F.when(any_float, V.from_double(double_sum)).otherwise(
        F.coalesce(V.from_long(long_sum), V.from_double(double_sum))
    )
    return result(total, *errors, kinds={"int", "long", "double"})


def _min_max(ctx: Ctx) -> Expr:
    parsed = _elements(ctx)
    if parsed is None:
        return placeholder()
    items, errors = parsed
    want = 1 if ctx.op == "$max" else -1

    def pick(acc: Column, e: Column) -> Column:
        def choose(ke: Column) -> Column:
            return with_kind(
                acc,
                lambda ka: (
                    F.when(K.is_nullish(e, ke), acc)
                    .when(acc.isNull() | (O.compare(e, acc, ke, ka) == want), e)
                    .otherwise(acc)
                ),
            )

        return with_kind(e, choose)

    best = F.aggregate(items, V.missing(), pick)
    return result(F.coalesce(best, V.null()), *errors)


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$literal": literal,
    "$let": let,
    "$meta": meta,
    "$currentDate": current_date,
    "$createUUID": create_uuid,
    "$sum": _sum_avg,
    "$avg": _sum_avg,
    "$min": _min_max,
    "$max": _min_max,
}
