"""Field-level query operators: `{<field>: <value or {$op: arg, ...}>}` to a `FieldCond`.

Supported: `$eq $ne $gt $gte $lt $lte $in $nin $exists $type $regex/$options $size $all
$elemMatch $mod $not`. Geospatial and bitwise operators are known but not supported
(`unsupported_option`); anything else is an `unknown_operator` with a "did you mean" hint.
`$regex` takes a string or an Extended JSON `{"$regularExpression": ...}`; `{<field>:
{"$regularExpression": ...}}` and regexes inside `$in`, `$nin`, `$all` and `$not` match too.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._mql.names import DOCUMENT_LEVEL, UNSUPPORTED_QUERY_OPERATORS
from pipeline_stages._mql.query import compare as C
from pipeline_stages._mql.query.literals import (
    BadLiteral,
    QueryLiteral,
    is_ejson,
    make_regex,
    parse_literal,
)
from pipeline_stages._mql.query.paths import AllOf, FieldCond, Leaf, Negated
from pipeline_stages._mql.query.values import Typed, is_any_object, typed_array

#: Compiles an `$elemMatch` sub-filter against one array element (a VARIANT column).
SubFilter = Callable[[Mapping[str, Any], Column, str], Column]

#: Operators Atlas or MongoDB knows that Sluice does not evaluate.
UNSUPPORTED = UNSUPPORTED_QUERY_OPERATORS

TYPE_CODES: dict[int, str] = {
    1: "double",
    2: "string",
    3: "object",
    4: "array",
    5: "binData",
    6: "undefined",
    7: "objectId",
    8: "bool",
    9: "date",
    10: "null",
    11: "regex",
    12: "dbPointer",
    13: "javascript",
    14: "symbol",
    15: "javascriptWithScope",
    16: "int",
    17: "timestamp",
    18: "long",
    19: "decimal",
    -1: "minKey",
    127: "maxKey",
}
TYPE_NAMES = frozenset(TYPE_CODES.values()) | {"number"}


@dataclass(frozen=True)
class OpContext:
    """Where an operator sits and how to report on it."""

    path: str
    problems: ProblemCollector
    sub_filter: SubFilter
    #: The operator object this operator sits in (`$regex` reads its `$options` sibling).
    siblings: Mapping[str, Any] = field(default_factory=dict)

    def at(self, *tokens: str | int) -> OpContext:
        """The context of a nested token (`$in`, an array index, ...)."""
        return replace(self, path=join_path(self.path, *tokens), siblings={})

    def within(self, ops: Mapping[str, Any], key: str) -> OpContext:
        """The context of operator `key` of the operator object `ops`."""
        return replace(self, path=join_path(self.path, key), siblings=ops)

    def fail(self, message: str, code: str = ProblemCode.INVALID_ARGUMENTS) -> None:
        """Record a problem at this path."""
        self.problems.error(self.path, code, message)


def is_operator_object(value: Any) -> bool:
    """True for `{$op: ...}` objects (not Extended JSON literals such as `{"$date": ...}`)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and next(iter(value)).startswith("$")
        and not is_ejson(value)
    )


def compile_field(value: Any, ctx: OpContext) -> FieldCond | None:
    """The condition `{<field>: value}` puts on a field (None after recording a problem)."""
    if is_operator_object(value):
        return compile_operators(value, ctx)
    lit = _literal(value, ctx)
    return Leaf(C.equals(lit)) if lit is not None else None


def compile_operators(ops: Mapping[str, Any], ctx: OpContext) -> FieldCond | None:
    """An operator object `{$gt: 1, $lt: 5}`: every operator must match."""
    conds: list[FieldCond] = []
    for key, arg in ops.items():
        here = ctx.within(ops, key)
        if key == "$options":
            if "$regex" not in ops:
                here.fail("$options needs a $regex")
            continue
        handler = _HANDLERS.get(key)
        if handler is None:
            _unknown(key, here)
            continue
        cond = handler(arg, here)
        if cond is not None:
            conds.append(cond)
    if len(conds) != len([k for k in ops if k != "$options"]):
        return None
    return conds[0] if len(conds) == 1 else AllOf(tuple(conds))


def _unknown(key: str, ctx: OpContext) -> None:
    if key in UNSUPPORTED:
        ctx.fail(f"{key} is not supported by Sluice", ProblemCode.UNSUPPORTED_OPTION)
        return
    hint = difflib.get_close_matches(key, [*_HANDLERS, "$options"], n=1)
    suffix = f"; did you mean '{hint[0]}'?" if hint else ""
    ctx.fail(f"unknown operator: {key}{suffix}", ProblemCode.UNKNOWN_OPERATOR)


def _literal(value: Any, ctx: OpContext) -> QueryLiteral | None:
    try:
        return parse_literal(value)
    except BadLiteral as exc:
        ctx.fail(str(exc))
        return None


# --------------------------------------------------------------------------- comparisons


def _eq(arg: Any, ctx: OpContext) -> FieldCond | None:
    # Explicit $eq with a regex matches stored regexes only (never, in JSON documents).
    lit = _literal(arg, ctx)
    return Leaf(C.compare("$eq", lit)) if lit is not None else None


def _ne(arg: Any, ctx: OpContext) -> FieldCond | None:
    lit = _literal(arg, ctx)
    if lit is not None and lit.kind == "regex":
        ctx.fail("Can't have regex as arg to $ne.")
        return None
    positive = _eq(arg, ctx) if lit is not None else None
    return Negated(positive) if positive is not None else None


def _ordering(op: str) -> Callable[[Any, OpContext], FieldCond | None]:
    def handler(arg: Any, ctx: OpContext) -> FieldCond | None:
        lit = _literal(arg, ctx)
        if lit is not None and lit.kind == "regex":
            ctx.fail(f"Can't have RegEx as arg to {op}")
            return None
        return Leaf(C.compare(op, lit)) if lit is not None else None

    return handler


def _literal_list(arg: Any, ctx: OpContext, op: str) -> list[QueryLiteral] | None:
    if not isinstance(arg, list):
        ctx.fail(f"{op} needs an array")
        return None
    lits: list[QueryLiteral] = []
    for i, item in enumerate(arg):
        if is_operator_object(item):
            ctx.at(i).fail(f"cannot nest $ under {op}")
            continue
        lit = _literal(item, ctx.at(i))
        if lit is not None:
            lits.append(lit)
    return lits if len(lits) == len(arg) else None


def _in(arg: Any, ctx: OpContext) -> FieldCond | None:
    lits = _literal_list(arg, ctx, "$in")
    return Leaf(C.in_list(lits)) if lits is not None else None


def _nin(arg: Any, ctx: OpContext) -> FieldCond | None:
    lits = _literal_list(arg, ctx, "$nin")
    return Negated(Leaf(C.in_list(lits))) if lits is not None else None


# --------------------------------------------------------------------------- element operators


def _exists(arg: Any, _ctx: OpContext) -> FieldCond:
    present = Leaf(C.exists_test, expand=False)
    # MongoDB reads the argument's truthiness: false, 0 and null mean "must be missing".
    return present if arg not in (False, 0, None) else Negated(present)


def _type(arg: Any, ctx: OpContext) -> FieldCond | None:
    items = arg if isinstance(arg, list) else [arg]
    if not items:
        ctx.fail("$type must match at least one type")
        return None
    names = [
        _type_name(item, ctx.at(i) if isinstance(arg, list) else ctx)
        for i, item in enumerate(items)
    ]
    known = [name for name in names if name is not None]
    return Leaf(C.type_test(known)) if len(known) == len(names) else None


def _type_name(item: Any, ctx: OpContext) -> str | None:
    if isinstance(item, str):
        if item in TYPE_NAMES:
            return item
        ctx.fail(f"Unknown type name alias: {item}")
        return None
    if isinstance(item, int | float) and not isinstance(item, bool):
        if float(item).is_integer() and int(item) in TYPE_CODES:
            return TYPE_CODES[int(item)]
        ctx.fail(f"Invalid numerical type code: {item}")
        return None
    ctx.fail("type must be represented as a number or a string")
    return None


# --------------------------------------------------------------------------- evaluation


def _regex(arg: Any, ctx: OpContext) -> FieldCond | None:
    options = ctx.siblings.get("$options")
    try:
        if is_ejson(arg) and "$regularExpression" in arg:
            lit = parse_literal(arg)
            if options is not None and lit.value.options:
                raise BadLiteral("options set in both $regex and $options")
            regex = make_regex(lit.value.pattern, (options or "") + lit.value.options)
        else:
            regex = make_regex(arg, "" if options is None else options)
    except BadLiteral as exc:
        ctx.fail(str(exc))
        return None
    return Leaf(C.regex_test(regex))


def _mod(arg: Any, ctx: OpContext) -> FieldCond | None:
    if not isinstance(arg, list):
        ctx.fail("malformed mod, needs to be an array")
        return None
    if len(arg) != 2:
        ctx.fail(f"malformed mod, {'not enough' if len(arg) < 2 else 'too many'} elements")
        return None
    numbers = [_whole(item, ctx.at(i), "mod") for i, item in enumerate(arg)]
    if numbers[0] is None or numbers[1] is None:
        return None
    if numbers[0] == 0:
        ctx.at(0).fail("divisor cannot be 0")
        return None
    return Leaf(C.mod_test(numbers[0], numbers[1]))


def _whole(item: Any, ctx: OpContext, op: str) -> int | None:
    """A number truncated toward zero, as MongoDB reads `$mod` arguments."""
    if isinstance(item, bool) or not isinstance(item, int | float):
        ctx.fail(f"malformed {op}, arguments must be numbers")
        return None
    if isinstance(item, float) and not (item == item and abs(item) < 2**63):
        ctx.fail(f"malformed {op}, arguments must be finite numbers")
        return None
    return int(item)


# --------------------------------------------------------------------------- array operators


def _size(arg: Any, ctx: OpContext) -> FieldCond | None:
    if isinstance(arg, bool) or not isinstance(arg, int | float):
        ctx.fail("$size needs a number")
        return None
    if not float(arg).is_integer():
        ctx.fail("$size must be a whole number")
        return None
    if arg < 0:
        ctx.fail("$size may not be negative")
        return None
    return Leaf(C.size_test(int(arg)), expand=False)


def _all(arg: Any, ctx: OpContext) -> FieldCond | None:
    if not isinstance(arg, list):
        ctx.fail("$all needs an array")
        return None
    if not arg:
        return Leaf(C.never)
    conds: list[FieldCond | None] = []
    for i, item in enumerate(arg):
        here = ctx.at(i)
        if isinstance(item, dict) and set(item) == {"$elemMatch"}:
            conds.append(_elem_match(item["$elemMatch"], here.at("$elemMatch")))
        elif is_operator_object(item):
            here.fail("no $ expressions in $all")
            conds.append(None)
        else:
            lit = _literal(item, here)
            conds.append(Leaf(C.equals(lit)) if lit is not None else None)
    if any(c is None for c in conds):
        return None
    return AllOf(tuple(c for c in conds if c is not None))


def _elem_match(arg: Any, ctx: OpContext) -> FieldCond | None:
    if not isinstance(arg, dict):
        ctx.fail("$elemMatch needs an Object")
        return None
    element_test = _element_test(arg, ctx)
    if element_test is None:
        return None

    def test(value: Typed) -> Column:
        found = F.exists(typed_array(value.as_array()), element_test)
        return value.is_array() & F.coalesce(found, F.lit(False))

    return Leaf(test, expand=False)


def _element_test(arg: dict[str, Any], ctx: OpContext) -> Callable[[Column], Column] | None:
    """What one typed element must satisfy: operators (value form) or a sub-filter."""
    first = next(iter(arg), "")
    if first.startswith("$") and first not in DOCUMENT_LEVEL:
        cond = compile_operators(arg, ctx)
        return (lambda e: cond.on_value(Typed.of_struct(e))) if cond is not None else None

    def matches(typed: Column) -> Column:
        # Only objects and arrays are documents a sub-filter can look into.
        element = Typed.of_struct(typed)
        container = is_any_object(element.value) | element.is_array()
        return container & ctx.sub_filter(arg, element.value, ctx.path)

    return matches


def _not(arg: Any, ctx: OpContext) -> FieldCond | None:
    if is_ejson(arg) and "$regularExpression" in arg:
        lit = _literal(arg, ctx)
        return Negated(Leaf(C.regex_test(lit.value))) if lit is not None else None
    if not isinstance(arg, dict):
        ctx.fail("$not needs a regex or a document")
        return None
    if not arg:
        ctx.fail("$not cannot be empty")
        return None
    inner = compile_operators(arg, ctx)
    return Negated(inner) if inner is not None else None


_HANDLERS: dict[str, Callable[[Any, OpContext], FieldCond | None]] = {
    "$eq": _eq,
    "$ne": _ne,
    "$gt": _ordering("$gt"),
    "$gte": _ordering("$gte"),
    "$lt": _ordering("$lt"),
    "$lte": _ordering("$lte"),
    "$in": _in,
    "$nin": _nin,
    "$exists": _exists,
    "$type": _type,
    "$regex": _regex,
    "$mod": _mod,
    "$size": _size,
    "$all": _all,
    "$elemMatch": _elem_match,
    "$not": _not,
}
