"""MQL aggregation expressions compiled to native Spark Columns over VARIANT values.

Entry points:

- `compile_expression(expr, scope, path, problems) -> Expr`: any expression (literal, field
  path, variable, operator object, array or object literal).
- `compile_object_expression(spec, scope, path, problems) -> Expr`: an object whose keys are
  field names (`{a: <expr>, b: {c: <expr>}}`), evaluated to a new object; fields whose value
  is missing are left out, as in MongoDB.
- `set_field` / `remove_field` (re-exported from `ops_paths`): `$addFields`/`$unset` writes.
- `apply_bindings` / `drop_bindings` (re-exported from `scope`): materialise shared
  subexpressions; see `scope.py`.

Compile-time problems are recorded on the collector (`unknown_operator` with a "did you mean"
hint, `invalid_arguments`, `unsupported_option`) and compilation carries on with a
placeholder, so one pass reports every problem. Run-time failures are per document: see
`Expr.error`.

Operators live in the `ops_*` modules, one per family, each exporting an `OPS` table; this
module only dispatches. Operands are evaluated once per operator: as bindings (temporary
columns, see `scope.py`) where the scope has them, or as per-operator `let` frames (single-
element `transform`s, see `ops_common.LetFrame`) inside lambdas and binding-less scopes.
Very deep operator nesting inside lambdas (15+ levels) needs a higher
`spark.sql.analyzer.maxIterations` than Spark's default 100 (each let is a lambda layer). Documented MQL operators Sluice does not implement are listed in
`UNSUPPORTED_OPERATORS` and reported as `unsupported_option`, so they are not confused with
typos.

Decimal128: VARIANT has no decimal128, so `$toDecimal` produces the Extended JSON form
`{"$numberDecimal": "<text>"}` (which serialises exactly as MongoDB's relaxed EJSON does) and
`$type` reports `"decimal"`. Arithmetic on decimals is carried out in double precision and
yields doubles (MongoDB would keep decimal128 precision and type).
"""

from __future__ import annotations

import difflib
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._mql import values as V
from pipeline_stages._mql.names import EXPRESSION_EJSON_KEYS, UNSUPPORTED_EXPRESSION_OPERATORS
from pipeline_stages._mql.ops import arithmetic as ops_arithmetic
from pipeline_stages._mql.ops import arrays as ops_arrays
from pipeline_stages._mql.ops import date_math as ops_date_math
from pipeline_stages._mql.ops import date_parse as ops_date_parse
from pipeline_stages._mql.ops import dates as ops_dates
from pipeline_stages._mql.ops import lambdas as ops_lambdas
from pipeline_stages._mql.ops import logic as ops_logic
from pipeline_stages._mql.ops import math as ops_math
from pipeline_stages._mql.ops import misc as ops_misc
from pipeline_stages._mql.ops import objects as ops_objects
from pipeline_stages._mql.ops import regex as ops_regex
from pipeline_stages._mql.ops import strings as ops_strings
from pipeline_stages._mql.ops import types as ops_types
from pipeline_stages._mql.ops.common import Ctx, LetFrame, constant, first_error, placeholder
from pipeline_stages._mql.ops.paths import (
    key_path,
    object_path,
    remove_field,
    set_field,
    value_path,
)
from pipeline_stages._mql.scope import Bindings, Expr, Scope, apply_bindings, drop_bindings

__all__ = [
    "Bindings",
    "Expr",
    "Scope",
    "apply_bindings",
    "compile_expression",
    "compile_object_expression",
    "drop_bindings",
    "remove_field",
    "set_field",
]

OPS = {
    **ops_arithmetic.OPS,
    **ops_math.OPS,
    **ops_logic.OPS,
    **ops_strings.OPS,
    **ops_regex.OPS,
    **ops_arrays.OPS,
    **ops_lambdas.OPS,
    **ops_types.OPS,
    **ops_dates.OPS,
    **ops_date_parse.OPS,
    **ops_date_math.OPS,
    **ops_objects.OPS,
    **ops_misc.OPS,
}

#: Documented MQL / Atlas expression operators that Sluice does not implement.
UNSUPPORTED_OPERATORS = UNSUPPORTED_EXPRESSION_OPERATORS

#: Extended JSON type wrappers accepted as literals inside expressions.
_EJSON_KEYS = EXPRESSION_EJSON_KEYS

#: System variables that exist in MongoDB but have no meaning (or no support) here.
_UNSUPPORTED_VARIABLES = frozenset({"NOW", "CLUSTER_TIME", "USER_ROLES", "SEARCH_META"})
_REDACT_VARIABLES = {"DESCEND": "descend", "PRUNE": "prune", "KEEP": "keep"}


def compile_expression(expr: Any, scope: Scope, path: str, problems: ProblemCollector) -> Expr:
    """Compile an MQL aggregation expression; problems are recorded, never raised.

    Args:
        expr: The parsed JSON of the expression (dicts keep their key order).
        scope: What the expression can see (document, metadata, variables, bindings).
        path: The JSON pointer of `expr`, used in problem paths.
        problems: Where compile-time problems are recorded.

    Returns:
        The compiled expression. When problems were recorded, parts of it are placeholders.
    """
    if isinstance(expr, str):
        if expr.startswith("$$"):
            return _variable(expr, scope, path, problems)
        if expr.startswith("$"):
            return _field_path(expr, scope, path, problems)
        return constant(expr)
    if isinstance(expr, list):
        return _array_literal(expr, scope, path, problems)
    if isinstance(expr, dict):
        if not expr:
            return constant({})
        first = next(iter(expr))
        if first in _EJSON_KEYS and len(expr) == 1:
            return _ejson_literal(first, expr[first], path, problems)
        if first.startswith("$"):
            if len(expr) != 1:
                problems.error(
                    path,
                    ProblemCode.INVALID_ARGUMENTS,
                    "An object representing an expression must have exactly one field: "
                    f"{sorted(expr)}",
                )
                return placeholder()
            return _operator(first, expr[first], scope, join_path(path, first), problems)
        return compile_object_expression(expr, scope, path, problems)
    return constant(expr)


def compile_object_expression(
    spec: dict[str, Any], scope: Scope, path: str, problems: ProblemCollector
) -> Expr:
    """Compile `{field: <expr>, ...}` to a new object; missing values leave their field out."""
    fields: list[tuple[str, Expr]] = []
    for name, sub in spec.items():
        if not _valid_field_name(name, join_path(path, name), problems):
            continue
        fields.append((name, compile_expression(sub, scope, join_path(path, name), problems)))
    if all(e.is_const for _, e in fields):
        return constant({name: e.const for name, e in fields})
    return Expr(
        value=_build_object(fields),
        error=first_error(*[e.error for _, e in fields]),
        kinds=frozenset({"object"}),
    )


def _build_object(fields: list[tuple[str, Expr]]) -> Any:
    if not fields:
        return V.literal({})
    if any(key_path([name]) is None for name, _ in fields):
        entries = F.create_map(*[c for name, e in fields for c in (F.lit(name), e.value)])
        return F.to_variant_object(F.map_filter(entries, lambda _, v: v.isNotNull()))
    struct = F.named_struct(*[c for name, e in fields for c in (F.lit(name), e.value)])
    obj = F.to_variant_object(struct)
    # Missing values become nulls inside the struct; delete exactly those keys afterwards
    # (`variant_delete` skips NULL paths).
    maybe_missing = [(n, e) for n, e in fields if e.kinds is None or "missing" in e.kinds]
    if not maybe_missing:
        return obj
    paths = [F.when(e.value.isNull(), F.lit(key_path([n]))) for n, e in maybe_missing]
    return F.variant_delete(obj, *paths)


def _valid_field_name(name: str, path: str, problems: ProblemCollector) -> bool:
    reason = None
    if name.startswith("$"):
        reason = f"FieldPath field names may not start with '$'. Consider using $getField or $setField: '{name}'"
    elif "." in name:
        reason = f"FieldPath field names may not contain '.': '{name}'"
    elif not name:
        reason = "FieldPath field names may not be empty strings."
    if reason:
        problems.error(path, ProblemCode.INVALID_ARGUMENTS, reason)
    return reason is None


def _array_literal(items: list[Any], scope: Scope, path: str, problems: ProblemCollector) -> Expr:
    compiled = [
        compile_expression(item, scope, join_path(path, i), problems)
        for i, item in enumerate(items)
    ]
    if all(e.is_const for e in compiled):
        return constant([e.const for e in compiled])
    # A missing element becomes null in an array literal: SQL NULL elements do exactly that.
    value = V.from_array(F.array(*[e.value for e in compiled]))
    return Expr(
        value=value, error=first_error(*[e.error for e in compiled]), kinds=frozenset({"array"})
    )


def _ejson_literal(key: str, body: Any, path: str, problems: ProblemCollector) -> Expr:
    try:
        if key == "$date":
            return constant({"$date": _iso_date(body)})
        if key in ("$numberLong", "$numberInt"):
            return constant(int(body))
        if key == "$numberDouble":
            return constant(float(body))
        return constant({key: str(body)})
    except (TypeError, ValueError, OverflowError) as exc:
        problems.error(path, ProblemCode.INVALID_VALUE, f"invalid Extended JSON {key} value: {exc}")
        return placeholder()


def _iso_date(body: Any) -> str:
    if isinstance(body, dict) and "$numberLong" in body:
        body = int(body["$numberLong"])
    if isinstance(body, bool) or not isinstance(body, int | str):
        raise ValueError(f"expected an ISO-8601 string or epoch milliseconds, got {body!r}")
    if isinstance(body, int):
        moment = datetime.fromtimestamp(body / 1000, tz=UTC)
    else:
        moment = datetime.fromisoformat(body)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def _field_path(raw: str, scope: Scope, path: str, problems: ProblemCollector) -> Expr:
    names = raw[1:].split(".")
    if not _valid_path_names(raw, names, path, problems):
        return placeholder()
    current = scope.variables.get("CURRENT", scope.current)
    return Expr(value=object_path(current, names))


def _valid_path_names(raw: str, names: list[str], path: str, problems: ProblemCollector) -> bool:
    """Validate the components of `$a.b` (names after the `$`) or `$$var.a.b` (var included)."""
    checked = names[1:] if raw.startswith("$$") else names
    reason = None
    if raw in ("$", "$$"):
        reason = "'$' by itself is not a valid FieldPath"
    elif any(not n for n in names):
        reason = f"FieldPath field names may not be empty strings: '{raw}'"
    elif any(n.startswith("$") for n in checked):
        reason = f"FieldPath field names may not start with '$': '{raw}'"
    if reason:
        problems.error(path, ProblemCode.INVALID_ARGUMENTS, reason)
    return reason is None


def _variable(raw: str, scope: Scope, path: str, problems: ProblemCollector) -> Expr:
    name, *names = raw[2:].split(".")
    if not _valid_path_names(raw, [name, *names], path, problems):
        return placeholder()
    if name in _UNSUPPORTED_VARIABLES:
        problems.error(
            path, ProblemCode.UNSUPPORTED_OPTION, f"the system variable $${name} is not supported"
        )
        return placeholder()
    if name == "REMOVE":
        return Expr(value=V.missing(), kinds=frozenset({"missing"}), cheap=True)
    if name in _REDACT_VARIABLES and not names:
        return constant(_REDACT_VARIABLES[name])
    if name in scope.variables:
        base = scope.variables[name]
    elif name == "ROOT":
        base = scope.root
    elif name == "CURRENT":
        base = scope.current
    else:
        problems.error(path, ProblemCode.INVALID_ARGUMENTS, f"Use of undefined variable: {name}")
        return placeholder()
    if not names:
        return Expr(value=base, cheap=True)
    if name in ("ROOT", "CURRENT") and name not in scope.variables:
        return Expr(value=object_path(base, names))
    return Expr(value=value_path(base, names))


def _operator(op: str, spec: Any, scope: Scope, path: str, problems: ProblemCollector) -> Expr:
    compiler = OPS.get(op)
    if compiler is not None:
        # Without bindings (inside lambdas), operands are let-bound per operator instead.
        frame = LetFrame.new() if scope.bindings is None else None
        out = compiler(Ctx(op, spec, path, scope, problems, compile_expression, frame))
        return frame.wrap(out) if frame is not None else out
    if op in UNSUPPORTED_OPERATORS:
        problems.error(
            path, ProblemCode.UNSUPPORTED_OPTION, f"expression operator '{op}' is not supported"
        )
        return placeholder()
    hint = difflib.get_close_matches(op, [*OPS, *UNSUPPORTED_OPERATORS], n=1)
    suffix = f"; did you mean '{hint[0]}'?" if hint else ""
    problems.error(path, ProblemCode.UNKNOWN_OPERATOR, f"Unrecognized expression '{op}'{suffix}")
    return placeholder()
