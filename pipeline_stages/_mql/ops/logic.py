"""Comparison, boolean and conditional operators.

Comparisons use MQL's cross-type (BSON) order (`order.compare`): `{$lt: [1, "a"]}` is true
because numbers sort before strings, and null/missing sort before everything else.

`$and`, `$or`, `$cond`, `$ifNull` and `$switch` short-circuit like MongoDB for errors: an
argument that MongoDB would not evaluate cannot fail the expression. (Spark still computes
the arguments' values eagerly; every computation is total, so this only costs time.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import order as O
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    first_error,
    named,
    placeholder,
    positional,
    result,
    when_all,
)
from pipeline_stages._mql.scope import Expr


def _no_error() -> Column:
    return F.lit(None).cast("string")


_COMPARISONS: dict[str, Callable[[Column], Column]] = {
    "$eq": lambda c: c == 0,
    "$ne": lambda c: c != 0,
    "$gt": lambda c: c > 0,
    "$gte": lambda c: c >= 0,
    "$lt": lambda c: c < 0,
    "$lte": lambda c: c <= 0,
}


def _compare_args(ctx: Ctx) -> tuple[Arg, Arg] | None:
    compiled = positional(ctx, 2, 2)
    if compiled is None:
        return None
    return ctx.arg(compiled[0]), ctx.arg(compiled[1])


def _comparison(ctx: Ctx) -> Expr:
    pair = _compare_args(ctx)
    if pair is None:
        return placeholder()
    left, right = pair
    cmp = O.compare(left.value, right.value, left.k, right.k)
    value = V.from_bool(_COMPARISONS[ctx.op](cmp))
    return result(value, left.error, right.error, kinds={"bool"})


def cmp(ctx: Ctx) -> Expr:
    """`$cmp`: -1, 0 or 1."""
    pair = _compare_args(ctx)
    if pair is None:
        return placeholder()
    left, right = pair
    value = V.from_long(O.compare(left.value, right.value, left.k, right.k))
    return result(value, left.error, right.error, kinds={"int"})


def truth(ctx: Ctx, expr: Expr) -> tuple[Column, Column | None]:
    """A materialised MQL truthiness column for `expr`, and `expr`'s error."""
    if expr.is_const:
        return F.lit(_const_truthy(expr.const)), expr.error
    arg = ctx.arg(expr)
    return ctx.bind(O.truthy(arg.value, arg.k)), arg.error


def _const_truthy(value: Any) -> bool:
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    return True


def _and_or(ctx: Ctx) -> Expr:
    compiled = positional(ctx, 0)
    if compiled is None:
        return placeholder()
    is_and = ctx.op == "$and"
    if not compiled:
        return result(V.from_bool(F.lit(is_and)), kinds={"bool"})
    truths = [truth(ctx, e) for e in compiled]
    value = truths[0][0]
    for t, _ in truths[1:]:
        value = (value & t) if is_and else (value | t)
    # MongoDB stops at the first false ($and) / true ($or) argument: later errors don't count.
    pairs: list[tuple[Column, Column]] = []
    for t, err in truths:
        if err is not None:
            pairs.append((err.isNotNull(), err))
        pairs.append((~t if is_and else t, _no_error()))
    can_fail = any(err is not None for _, err in truths)
    error = when_all(pairs) if can_fail else None
    return Expr(value=V.from_bool(value), error=error, kinds=frozenset({"bool"}))


def not_(ctx: Ctx) -> Expr:
    """`$not`: the negated truthiness of its argument."""
    compiled = positional(ctx, 1, 1)
    if compiled is None:
        return placeholder()
    t, err = truth(ctx, compiled[0])
    return result(V.from_bool(~t), err, kinds={"bool"})


def _union_kinds(*exprs: Expr) -> frozenset[str] | None:
    if any(e.kinds is None for e in exprs):
        return None
    return frozenset().union(*[e.kinds for e in exprs if e.kinds is not None])


def cond(ctx: Ctx) -> Expr:
    """`$cond`: `[if, then, else]` or `{if, then, else}`."""
    if isinstance(ctx.spec, dict):
        spec = named(ctx, ("if", "then", "else"))
        if spec is None:
            return placeholder()
        parts = [ctx.sub(spec[k], k) for k in ("if", "then", "else")]
    else:
        compiled = positional(ctx, 3, 3)
        if compiled is None:
            return placeholder()
        parts = compiled
    test, then, other = parts
    if test.is_const:
        chosen = then if _const_truthy(test.const) else other
        return Expr(chosen.value, chosen.error, chosen.kinds, chosen.const, chosen.cheap)
    t, err = truth(ctx, test)
    value = F.when(t, then.value).otherwise(other.value)
    branch_error = None
    if then.error is not None or other.error is not None:
        branch_error = F.when(t, then.error_or_null()).otherwise(other.error_or_null())
    return Expr(value=value, error=first_error(err, branch_error), kinds=_union_kinds(then, other))


def if_null(ctx: Ctx) -> Expr:
    """`$ifNull`: the first argument that is not null or missing, else the last argument."""
    items = ctx.spec if isinstance(ctx.spec, list) else [ctx.spec]
    if len(items) < 2:
        return ctx.fail(f"$ifNull needs at least two arguments, had: {len(items)}")
    compiled = [ctx.sub(item, i) for i, item in enumerate(items)]
    *candidates, last = compiled
    value_pairs: list[tuple[Column, Column]] = []
    error_pairs: list[tuple[Column, Column]] = []
    for expr in candidates:
        used = ctx.use(expr)
        present = ~K.is_nullish(used.value, expr.static_kind)
        value_pairs.append((present, used.value))
        if used.error is not None:
            error_pairs.append((used.error.isNotNull(), used.error))
        error_pairs.append((present, _no_error()))
    value = when_all(value_pairs, last.value)
    has_errors = last.error is not None or any(e.error is not None for e in candidates)
    error = when_all(error_pairs, last.error_or_null()) if has_errors else None
    return Expr(value=value, error=error, kinds=_union_kinds(*compiled))


def _switch_branches(ctx: Ctx, branches: Any) -> list[tuple[Expr, Expr]] | None:
    if not isinstance(branches, list):
        ctx.fail(
            f"$switch expected an array for 'branches', found: {_json_type(branches)}", "branches"
        )
        return None
    out = []
    for i, branch in enumerate(branches):
        where = ("branches", i)
        if not isinstance(branch, dict):
            ctx.fail(
                f"$switch expected each branch to be an object, found: {_json_type(branch)}", *where
            )
            return None
        unknown = [k for k in branch if k not in ("case", "then")]
        if unknown:
            ctx.fail(
                f"$switch found an unknown argument to a branch: {unknown[0]}", *where, unknown[0]
            )
            return None
        if "case" not in branch:
            ctx.fail("$switch requires each branch have a 'case' expression", *where)
            return None
        if "then" not in branch:
            ctx.fail("$switch requires each branch have a 'then' expression.", *where)
            return None
        out.append(
            (ctx.sub(branch["case"], *where, "case"), ctx.sub(branch["then"], *where, "then"))
        )
    if not out:
        ctx.fail("$switch requires at least one branch.", "branches")
        return None
    return out


def _json_type(value: Any) -> str:
    return V.literal_kind(value)


def switch(ctx: Ctx) -> Expr:
    """`$switch`: the first branch whose `case` is truthy, else `default`, else an error."""
    if not isinstance(ctx.spec, dict):
        return ctx.fail(f"$switch requires an object as an argument, found: {_json_type(ctx.spec)}")
    for key in ctx.spec:
        if key not in ("branches", "default"):
            return ctx.fail(f"$switch found an unknown argument: {key}", key)
    branches = _switch_branches(ctx, ctx.spec.get("branches", []))
    if branches is None:
        return placeholder()
    default = ctx.sub(ctx.spec["default"], "default") if "default" in ctx.spec else None
    value_pairs, error_pairs = [], []
    for case, then in branches:
        t, err = truth(ctx, case)
        value_pairs.append((t, then.value))
        if err is not None:
            error_pairs.append((err.isNotNull(), err))
        error_pairs.append((t, then.error_or_null()))
    if default is None:
        otherwise_value, otherwise_error = (
            V.null(),
            F.lit(
                "$switch could not find a matching branch for an input, and no default was specified."
            ),
        )
    else:
        otherwise_value, otherwise_error = default.value, default.error_or_null()
    exprs = [then for _, then in branches] + ([default] if default is not None else [])
    return Expr(
        value=when_all(value_pairs, otherwise_value),
        error=when_all(error_pairs, otherwise_error),
        kinds=_union_kinds(*exprs) if default is not None else None,
    )


OPS: dict[str, Callable[[Ctx], Expr]] = {
    **dict.fromkeys(_COMPARISONS, _comparison),
    "$cmp": cmp,
    "$and": _and_or,
    "$or": _and_or,
    "$not": not_,
    "$cond": cond,
    "$ifNull": if_null,
    "$switch": switch,
}
