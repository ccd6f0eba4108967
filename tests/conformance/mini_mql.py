"""A deliberately tiny MQL expression evaluator for the reference executor.

It covers what the transcripts use: field paths, literals, `$literal`, `$meta: "stream..."`,
arithmetic (`$add`, `$subtract`, `$multiply`, `$divide`), dates (`$toDate`,
`$dateFromString`), `$concat`, `$cond`, `$ifNull`, comparisons and boolean operators. Errors
are `MqlError`s with MongoDB's wording, so DLQ reasons match Atlas's. Anything else raises
`MqlError("Unrecognized expression ...")`; growing this into a general evaluator is a non-goal
(style guide: no mongomock-style god evaluator).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bson import ObjectId

from pipeline_stages._documents.values import (
    INT64_MAX,
    INT64_MIN,
    MISSING,
    MqlError,
    compare,
    get_path,
    is_nullish,
    is_number,
    mql_type,
    parse_iso_date,
    to_datetime_ms,
    to_epoch_ms,
    truthy,
)


@dataclass(frozen=True)
class Scope:
    """What an expression can see: the current document and the stream metadata."""

    root: Mapping[str, Any]
    meta: Mapping[str, Any] = field(default_factory=dict)


def evaluate(expr: Any, scope: Scope) -> Any:
    """Evaluate an aggregation expression against `scope`; MISSING for absent fields."""
    if isinstance(expr, str):
        return _field_path(expr, scope) if expr.startswith("$") else expr
    if isinstance(expr, list):
        return [_null_if_missing(evaluate(e, scope)) for e in expr]
    if isinstance(expr, dict):
        if len(expr) == 1:
            ((key, arg),) = expr.items()
            if key.startswith("$"):
                operator = OPERATORS.get(key)
                if operator is None:
                    raise MqlError(f"Unrecognized expression '{key}'")
                return operator(arg, scope)
        return {
            k: v for k, v in ((k, evaluate(v, scope)) for k, v in expr.items()) if v is not MISSING
        }
    return expr


def _null_if_missing(value: Any) -> Any:
    return None if value is MISSING else value


def _field_path(expr: str, scope: Scope) -> Any:
    if expr.startswith("$$"):
        name, _, rest = expr[2:].partition(".")
        if name not in ("ROOT", "CURRENT"):
            raise MqlError(f"Use of undefined variable: {name}")
        return get_path(scope.root, rest) if rest else dict(scope.root)
    return get_path(scope.root, expr[1:])


def _args(arg: Any, scope: Scope) -> list[Any]:
    items = arg if isinstance(arg, list) else [arg]
    return [evaluate(a, scope) for a in items]


def _fit_integer(value: int) -> int | float:
    # MongoDB widens int -> long -> double on overflow.
    return value if INT64_MIN <= value <= INT64_MAX else float(value)


# --------------------------------------------------------------------------- arithmetic


def _add(arg: Any, scope: Scope) -> Any:
    values = _args(arg, scope)
    if any(is_nullish(v) for v in values):
        return None
    dates = [v for v in values if isinstance(v, datetime)]
    for v in values:
        if not is_number(v) and not isinstance(v, datetime):
            raise MqlError(f"$add only supports numeric or date types, not {mql_type(v)}")
    if len(dates) > 1:
        raise MqlError("only one date allowed in an $add expression")
    total = sum(v for v in values if not isinstance(v, datetime))
    if dates:
        return to_datetime_ms(to_epoch_ms(dates[0]) + round(total))
    return _fit_integer(total) if isinstance(total, int) else total


def _subtract(arg: Any, scope: Scope) -> Any:
    left, right = _args(arg, scope)
    if is_nullish(left) or is_nullish(right):
        return None
    if isinstance(left, datetime) and isinstance(right, datetime):
        return to_epoch_ms(left) - to_epoch_ms(right)
    if isinstance(left, datetime) and is_number(right):
        return to_datetime_ms(to_epoch_ms(left) - round(right))
    if is_number(left) and is_number(right):
        diff = left - right
        return _fit_integer(diff) if isinstance(diff, int) else diff
    raise MqlError(f"can't $subtract {mql_type(right)} from {mql_type(left)}")


def _multiply(arg: Any, scope: Scope) -> Any:
    values = _args(arg, scope)
    if any(is_nullish(v) for v in values):
        return None
    product: Any = 1
    for v in values:
        if not is_number(v):
            raise MqlError(f"$multiply only supports numeric types, not {mql_type(v)}")
        product *= v
    return _fit_integer(product) if isinstance(product, int) else product


def _divide(arg: Any, scope: Scope) -> Any:
    left, right = _args(arg, scope)
    if is_nullish(left) or is_nullish(right):
        return None
    if not is_number(left) or not is_number(right):
        raise MqlError(
            f"$divide only supports numeric types, not {mql_type(left)} and {mql_type(right)}"
        )
    if right == 0:
        raise MqlError("can't $divide by zero")
    return left / right


# --------------------------------------------------------------------------- dates, strings


def _to_date(arg: Any, scope: Scope) -> Any:
    value = evaluate(arg, scope)
    if is_nullish(value):
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return _parse_date_string(value)
    if is_number(value):
        return to_datetime_ms(int(value))
    if isinstance(value, ObjectId):
        return value.generation_time
    raise MqlError(f"can't convert from BSON type {mql_type(value)} to Date")


def _parse_date_string(text: str) -> datetime:
    try:
        return parse_iso_date(text)
    except ValueError:
        raise MqlError(f"Error parsing date string '{text}'") from None


def _date_from_string(arg: Any, scope: Scope) -> Any:
    if not isinstance(arg, dict) or "dateString" not in arg:
        raise MqlError("$dateFromString requires that 'dateString' be present")
    value = evaluate(arg["dateString"], scope)
    if is_nullish(value):
        return None
    if not isinstance(value, str):
        raise MqlError(
            f"$dateFromString requires that 'dateString' be a string, found: {mql_type(value)}"
        )
    return _parse_date_string(value)


def _concat(arg: Any, scope: Scope) -> Any:
    values = _args(arg, scope)
    if any(is_nullish(v) for v in values):
        return None
    for v in values:
        if not isinstance(v, str):
            raise MqlError(f"$concat only supports strings, not {mql_type(v)}")
    return "".join(values)


def _meta(arg: Any, scope: Scope) -> Any:
    if not isinstance(arg, str) or not arg.startswith("stream"):
        raise MqlError(f"unsupported $meta path: {arg!r}")
    return get_path(scope.meta, arg)


# --------------------------------------------------------------------------- logic


def _cond(arg: Any, scope: Scope) -> Any:
    if isinstance(arg, dict):
        branches = [arg.get("if"), arg.get("then"), arg.get("else")]
    else:
        branches = list(arg)
    condition, then, otherwise = branches
    return evaluate(then if truthy(evaluate(condition, scope)) else otherwise, scope)


def _if_null(arg: Any, scope: Scope) -> Any:
    for expr in arg[:-1]:
        value = evaluate(expr, scope)
        if not is_nullish(value):
            return value
    return evaluate(arg[-1], scope)


def _comparison(test: Callable[[int], bool]) -> Callable[[Any, Scope], bool]:
    def operator(arg: Any, scope: Scope) -> bool:
        left, right = _args(arg, scope)
        return test(compare(left, right))

    return operator


OPERATORS: dict[str, Callable[[Any, Scope], Any]] = {
    "$literal": lambda arg, scope: arg,
    "$meta": _meta,
    "$add": _add,
    "$subtract": _subtract,
    "$multiply": _multiply,
    "$divide": _divide,
    "$toDate": _to_date,
    "$dateFromString": _date_from_string,
    "$concat": _concat,
    "$cond": _cond,
    "$ifNull": _if_null,
    "$eq": _comparison(lambda c: c == 0),
    "$ne": _comparison(lambda c: c != 0),
    "$gt": _comparison(lambda c: c > 0),
    "$gte": _comparison(lambda c: c >= 0),
    "$lt": _comparison(lambda c: c < 0),
    "$lte": _comparison(lambda c: c <= 0),
    "$and": lambda arg, scope: all(truthy(v) for v in _args(arg, scope)),
    "$or": lambda arg, scope: any(truthy(v) for v in _args(arg, scope)),
    "$not": lambda arg, scope: not truthy(_args(arg, scope)[0]),
}

__all__ = ["MISSING", "OPERATORS", "Scope", "evaluate"]
