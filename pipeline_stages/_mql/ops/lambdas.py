"""`$map`, `$filter` and `$reduce` on Spark higher-order functions.

`$$this`, `$$value` and `as` names are bound to the Spark lambda variables, so element
expressions are compiled inside the lambda, where no bindings exist (operands are let-bound
per operator instead, see `ops_common.LetFrame`). When the element expression can fail, each
element yields a `(value, error)` struct and the operator's error is the first element
error, in array order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import order as O
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.arrays import _is_array, _items, _no_error
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    first_element_error,
    in_frame,
    kind_text,
    named,
    pair_of,
    placeholder,
    result,
    valid_variable_name,
    when_all,
)
from pipeline_stages._mql.ops.messages import message
from pipeline_stages._mql.scope import Expr


def _lambda_input(ctx: Ctx, spec: dict[str, Any], op_text: str) -> tuple[Arg, Column]:
    """The `input` operand and its type error (null/missing input makes the result null)."""
    inp = ctx.arg(ctx.sub(spec["input"], "input"))
    error = F.when(~inp.nullish & ~_is_array(inp), message(op_text, kind_text(inp)))
    return inp, error


def _var_name(ctx: Ctx, spec: dict[str, Any]) -> str | None:
    name = spec.get("as", "this")
    return name if valid_variable_name(ctx, name, "as") else None


def map_(ctx: Ctx) -> Expr:
    """`$map`: `{input, as, in}`; a missing result becomes null in the output array."""
    spec = named(ctx, ("input", "in"), ("as",))
    if spec is None:
        return placeholder()
    name = _var_name(ctx, spec)
    inp, type_error = _lambda_input(ctx, spec, "input to $map must be an array not ")
    if name is None:
        return placeholder()
    captured: list[Expr] = []

    def each(x: Column) -> Column:
        body = ctx.sub(spec["in"], "in", scope=ctx.scope.in_lambda(**{name: x}))
        captured.append(body)
        return body.value if body.error is None else pair_of(body)

    mapped = F.transform(_items(inp), each)
    if captured[0].error is None:
        value, element_error = mapped, None
    else:
        pairs = ctx.bind(mapped)
        value = F.transform(pairs, lambda p: p["v"])
        element_error = first_element_error(F.transform(pairs, lambda p: p["e"]))
    out = F.when(inp.nullish, V.null()).otherwise(V.from_array(value))
    return result(
        out,
        inp.error,
        own=F.coalesce(type_error, element_error) if element_error is not None else type_error,
        kinds={"array", "null"},
    )


def filter_(ctx: Ctx) -> Expr:
    """`$filter`: `{input, as, cond, limit}`: the elements for which `cond` is truthy."""
    spec = named(ctx, ("input", "cond"), ("as", "limit"))
    if spec is None:
        return placeholder()
    name = _var_name(ctx, spec)
    inp, type_error = _lambda_input(ctx, spec, "input to $filter must be an array not ")
    if name is None:
        return placeholder()
    captured: list[Expr] = []

    def tag(x: Column) -> Column:
        cond = ctx.sub(spec["cond"], "cond", scope=ctx.scope.in_lambda(**{name: x}))
        captured.append(cond)

        def build(lam: Ctx) -> Column:
            arg = lam.arg(cond)
            truth = O.truthy(arg.value, arg.k)
            return F.struct(
                x.alias("v"),
                truth.alias("k"),
                (arg.error if arg.error is not None else F.lit(None).cast("string")).alias("e"),
            )

        return in_frame(ctx, ctx.scope.in_lambda(**{name: x}), build)

    tagged = F.transform(_items(inp), tag)
    element_error = None
    if captured[0].error is not None:
        tagged = ctx.bind(tagged)
        element_error = first_element_error(F.transform(tagged, lambda p: p["e"]))
    kept = F.transform(F.filter(tagged, lambda p: p["k"]), lambda p: p["v"])
    own = type_error if element_error is None else F.coalesce(type_error, element_error)
    errors = [inp.error]
    if "limit" in spec:
        limit = ctx.arg(ctx.sub(spec["limit"], "limit"))
        n = V.as_whole_number(limit.value, limit.k)
        limit_error = when_all(
            [
                (limit.nullish, _no_error()),
                (
                    n.isNull() | (n > K.INT32_MAX),
                    message(
                        "$filter: limit must be represented as a 32-bit integral value: ",
                        F.to_json(limit.value),
                    ),
                ),
                (n < 1, message("$filter: limit must be greater than 0: ", n.cast("string"))),
            ]
        )
        own = F.coalesce(own, limit_error)
        kept = F.when(limit.nullish, kept).otherwise(
            F.slice(kept, 1, F.least(n, F.lit(K.INT32_MAX)).cast("int"))
        )
        errors.append(limit.error)
    out = F.when(inp.nullish, V.null()).otherwise(V.from_array(kept))
    return result(out, *errors, own=own, kinds={"array", "null"})


def reduce_(ctx: Ctx) -> Expr:
    """`$reduce`: `{input, initialValue, in}` with `$$this` and `$$value`."""
    spec = named(ctx, ("input", "initialValue", "in"), what="argument")
    if spec is None:
        return placeholder()
    inp = ctx.arg(ctx.sub(spec["input"], "input"))
    initial = ctx.sub(spec["initialValue"], "initialValue")
    type_error = F.when(
        ~inp.nullish & ~_is_array(inp),
        message("$reduce requires that 'input' be an array, found: ", F.to_json(inp.value)),
    )
    start = F.struct(initial.value.alias("v"), F.lit(None).cast("string").alias("e"))

    def step(acc: Column, x: Column) -> Column:
        body = pair_of(ctx.sub(spec["in"], "in", scope=ctx.scope.in_lambda(this=x, value=acc["v"])))
        failed = acc["e"].isNotNull()
        value = F.when(failed, acc["v"]).otherwise(body["v"])
        error = F.coalesce(acc["e"], body["e"])
        return F.struct(value.alias("v"), error.alias("e"))

    folded = ctx.bind(F.aggregate(_items(inp), start, step))
    out = F.when(inp.nullish, V.null()).otherwise(folded["v"])
    return result(out, inp.error, initial.error, own=F.coalesce(type_error, folded["e"]))


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$map": map_,
    "$filter": filter_,
    "$reduce": reduce_,
}
