"""Type operators: `$type`, `$isNumber`, `$convert` and its shortcuts (`$toInt`, ...).

`$convert` follows MongoDB's conversion table for the targets double, string, objectId, bool,
date, int, long and decimal; other conversions fail with "Unsupported conversion from <a> to
<b> in $convert with no onError value". Failures are caught by `onError`; a null or missing
input yields `onNull` (default null). The target `to` must be a constant (a type name or
number). Strings parse as MongoDB's number parser does: optional sign, decimal digits (and
for double/decimal a fraction, an exponent, `Infinity`/`NaN`), no surrounding spaces, no hex.
`$toString` of a double prints the shortest round-trip form (`1`, `0.1`, `1e+20`); of an
object or array, its JSON (MongoDB 8 behaviour). Decimal128 results are
`{"$numberDecimal": "<text>"}` objects (see `expressions.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Ctx,
    named,
    placeholder,
    positional,
    result,
    when_all,
)
from pipeline_stages._mql.ops.conversions import CONVERSIONS, RESULT_KINDS, _to_date, _unsupported
from pipeline_stages._mql.scope import Expr

#: BSON type numbers accepted by `to`.
TYPE_CODES = {
    1: "double", 2: "string", 3: "object", 4: "array", 5: "binData", 6: "undefined",
    7: "objectId", 8: "bool", 9: "date", 10: "null", 11: "regex", 16: "int", 17: "timestamp",
    18: "long", 19: "decimal", -1: "minKey", 127: "maxKey",
}  # fmt: skip
TYPE_NAMES = frozenset(TYPE_CODES.values()) | {"javascript", "symbol", "dbPointer", "missing"}
SUPPORTED_TARGETS = ("double", "string", "objectId", "bool", "date", "int", "long", "decimal")


def _target(ctx: Ctx, to: Expr) -> str | None:
    if not to.is_const:
        ctx.unsupported("$convert requires a constant 'to' in Sluice", "to")
        return None
    raw: Any = to.const.get("type") if isinstance(to.const, dict) else to.const
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        ctx.fail(
            f"$convert's 'to' argument must be a string or number, but is {V.literal_kind(raw)}",
            "to",
        )
        return None
    if isinstance(raw, float):
        if raw != int(raw):
            ctx.fail("In $convert, numeric 'to' argument is not an integer", "to")
            return None
        raw = int(raw)
    if isinstance(raw, int):
        if raw not in TYPE_CODES:
            ctx.fail(
                f"In $convert, numeric value for 'to' does not correspond to a BSON type: {raw}",
                "to",
            )
            return None
        return TYPE_CODES[raw]
    if raw not in TYPE_NAMES:
        ctx.fail(f"Unknown type name: {raw}", "to")
        return None
    return raw


def _convert(
    ctx: Ctx, input_expr: Expr, target: str, on_error: Expr | None, on_null: Expr | None
) -> Expr:
    a = ctx.arg(input_expr)
    if target == "date":
        converted, failure = _to_date(a, ctx.bind)
    elif target in CONVERSIONS:
        converted, failure = CONVERSIONS[target](a)
    else:
        converted, failure = V.null(), _unsupported(a, target)
    failure = ctx.bind(failure)
    failed = failure.isNotNull()
    value = when_all(
        [
            (a.nullish, on_null.value if on_null is not None else V.null()),
            (failed, on_error.value if on_error is not None else V.null()),
        ],
        converted,
    )
    own = when_all(
        [
            (
                a.nullish,
                on_null.error_or_null() if on_null is not None else F.lit(None).cast("string"),
            ),
            (failed, on_error.error_or_null() if on_error is not None else failure),
        ]
    )
    kinds = None
    if on_error is None and on_null is None:
        kinds = RESULT_KINDS.get(target, {target}) | {"null"}
    return result(value, a.error, own=own, kinds=kinds)


def convert(ctx: Ctx) -> Expr:
    """`$convert`: `{input, to, onError, onNull}`."""
    spec = named(ctx, ("input", "to"), ("onError", "onNull"))
    if spec is None:
        return placeholder()
    input_expr = ctx.sub(spec["input"], "input")
    to = ctx.sub(spec["to"], "to")
    if to.is_const and to.const is None:
        return result(V.null(), input_expr.error, kinds={"null"})
    target = _target(ctx, to)
    if target is None:
        return placeholder()
    on_error = ctx.sub(spec["onError"], "onError") if "onError" in spec else None
    on_null = ctx.sub(spec["onNull"], "onNull") if "onNull" in spec else None
    return _convert(ctx, input_expr, target, on_error, on_null)


def _shortcut(target: str) -> Callable[[Ctx], Expr]:
    def compile_op(ctx: Ctx) -> Expr:
        items = ctx.spec if isinstance(ctx.spec, list) else [ctx.spec]
        if len(items) != 1:
            return ctx.fail(f"{ctx.op} requires a single argument, got {len(items)}")
        compiled = positional(ctx, 1, 1)
        if compiled is None:
            return placeholder()
        return _convert(ctx, compiled[0], target, None, None)

    return compile_op


def type_(ctx: Ctx) -> Expr:
    """`$type`: the BSON type name (`"missing"` for a missing value)."""
    compiled = positional(ctx, 1, 1)
    if compiled is None:
        return placeholder()
    expr = compiled[0]
    if expr.static_kind is not None:
        return result(V.literal(expr.static_kind), expr.error, kinds={"string"})
    a = ctx.arg(expr)
    return result(V.from_string(a.kind), a.error, kinds={"string"})


def is_number(ctx: Ctx) -> Expr:
    """`$isNumber`."""
    compiled = positional(ctx, 1, 1)
    if compiled is None:
        return placeholder()
    a = ctx.arg(compiled[0])
    return result(V.from_bool(a.kind_in(K.NUMERIC_TYPES)), a.error, kinds={"bool"})


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$type": type_,
    "$isNumber": is_number,
    "$convert": convert,
    "$toInt": _shortcut("int"),
    "$toLong": _shortcut("long"),
    "$toDouble": _shortcut("double"),
    "$toDecimal": _shortcut("decimal"),
    "$toString": _shortcut("string"),
    "$toDate": _shortcut("date"),
    "$toBool": _shortcut("bool"),
    "$toObjectId": _shortcut("objectId"),
}
