"""MQL query filters (`$match`, `$validate`) compiled to native Spark predicates.

`compile_filter(filter, scope, path, problems)` turns a filter document into a `Predicate`:
a non-NULL BOOLEAN condition, plus a per-document error column when the filter can fail at
run time (only `$expr` can). Compile-time problems are all recorded in `problems`, with
JSON-pointer paths into the filter, and compiling carries on past them.

Top level: field conditions (see `query_ops`), `$and`, `$or`, `$nor`, `$expr` (aggregation
expressions, truthiness as in `$cond`), `$jsonSchema` (see `json_schema`), `$comment`
(ignored). `$where`, `$text` and the geospatial operators are rejected, as Atlas rejects
them in `$validate`.

Errors in `$and`/`$or`/`$nor`: a child's error counts only when the children that cannot fail
do not already decide the result (`{$and: [{a: 1}, {$expr: ...}]}` cannot fail when `a` is
not 1), whatever the order of the children: MongoDB's optimiser may reorder them too, so the
written order gives no guarantee there either.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._mql import order as O
from pipeline_stages._mql import values as V
from pipeline_stages._mql.names import LOGICAL, TOP_LEVEL
from pipeline_stages._mql.query.json_schema import compile_json_schema
from pipeline_stages._mql.query.ops import UNSUPPORTED, OpContext, compile_field
from pipeline_stages._mql.query.paths import Paths
from pipeline_stages._mql.scope import Predicate, Scope

__all__ = ["compile_filter"]

_EXPRESSIONS_MODULE = "pipeline_stages._mql.expressions"


def compile_filter(
    filter: Any,  # noqa: A002 - the name every caller uses
    scope: Scope,
    path: str,
    problems: ProblemCollector,
) -> Predicate:
    """Compile an MQL query filter to a `Predicate` evaluated on `scope.current`.

    Args:
        filter: The parsed JSON filter document (key order preserved).
        scope: What the filter sees; field paths read `scope.current`.
        path: JSON pointer of the filter in the request, prefixed to problem paths.
        problems: Collects every compile-time problem; compiling continues past them.

    Returns:
        The predicate. It is meaningless when problems were recorded.
    """
    return _Compiler(scope, problems).document(filter, scope.current, path, top=True)


class _Compiler:
    """One filter compilation: the scope for `$expr` and the problem sink."""

    def __init__(self, scope: Scope, problems: ProblemCollector) -> None:
        self.scope = scope
        self.problems = problems
        self.paths = Paths(scope)

    def document(self, filter: Any, doc: Column, path: str, *, top: bool) -> Predicate:  # noqa: A002
        """A filter document: every clause must hold."""
        if not isinstance(filter, Mapping):
            self.problems.error(path, ProblemCode.INVALID_ARGUMENTS, "a filter must be an object")
            return _always(False)
        clauses = [
            self.clause(key, value, doc, join_path(path, key), top=top)
            for key, value in filter.items()
        ]
        return all_of(clauses)

    def clause(self, key: str, value: Any, doc: Column, path: str, *, top: bool) -> Predicate:
        """One `key: value` pair of a filter document."""
        if key.startswith("$"):
            return self.operator(key, value, doc, path, top=top)
        ctx = OpContext(path, self.problems, self.sub_filter)
        cond = compile_field(value, ctx)
        if cond is None:
            return _always(False)
        return Predicate(cond.on_path(self.paths, doc, key.split(".")))

    def sub_filter(self, filter: Mapping[str, Any], element: Column, path: str) -> Column:
        """An `$elemMatch` sub-filter on one array element (which cannot fail: no `$expr`)."""
        return self.document(filter, element, path, top=False).condition

    def operator(self, key: str, value: Any, doc: Column, path: str, *, top: bool) -> Predicate:
        """A top-level operator clause."""
        if key in LOGICAL:
            return self.logical(key, value, doc, path, top=top)
        if key == "$comment":
            return _always(True)
        if key in ("$expr", "$jsonSchema") and not top:
            self._fail(path, f"{key} can only be applied to the top-level document")
            return _always(False)
        if key == "$expr":
            return self.expr(value, path)
        if key == "$jsonSchema":
            return Predicate(compile_json_schema(value, doc, path, self.problems))
        if key in UNSUPPORTED:
            message = f"{key} is not supported in stream processing filters"
            self._fail(path, message, ProblemCode.UNSUPPORTED_OPTION)
            return _always(False)
        hint = difflib.get_close_matches(key, TOP_LEVEL, n=1)
        suffix = f"; did you mean '{hint[0]}'?" if hint else ""
        self._fail(path, f"unknown top level operator: {key}{suffix}", ProblemCode.UNKNOWN_OPERATOR)
        return _always(False)

    def logical(self, key: str, value: Any, doc: Column, path: str, *, top: bool) -> Predicate:
        """`$and`, `$or`, `$nor`: a non-empty array of filter documents."""
        if not isinstance(value, list) or not value:
            self._fail(path, f"{key} argument must be a non-empty array")
            return _always(False)
        children = []
        for i, child in enumerate(value):
            if not isinstance(child, Mapping):
                self._fail(join_path(path, i), f"{key} argument's entries must be objects")
                continue
            children.append(self.document(child, doc, join_path(path, i), top=top))
        if key == "$and":
            return all_of(children)
        either = any_of(children)
        return either if key == "$or" else Predicate(~either.condition, either.error)

    def expr(self, value: Any, path: str) -> Predicate:
        """`$expr`: an aggregation expression, true when its value is truthy."""
        try:
            from pipeline_stages._mql.expressions import compile_expression
        except ModuleNotFoundError as exc:
            if exc.name != _EXPRESSIONS_MODULE:
                raise
            message = "$expr needs the aggregation-expression compiler, which is not installed"
            self._fail(path, message, ProblemCode.UNSUPPORTED_OPTION)
            return _always(False)
        compiled = compile_expression(value, self.scope, path, self.problems)
        # truthy reads the value and its type tag several times: materialise both once.
        result = compiled.value if compiled.cheap else self.scope.bind(compiled.value)
        kind = compiled.static_kind or self.scope.bind(V.kind_of(result))
        return Predicate(O.truthy(result, kind), compiled.error)

    def _fail(self, path: str, message: str, code: str = ProblemCode.INVALID_ARGUMENTS) -> None:
        self.problems.error(path, code, message)


def _always(value: bool) -> Predicate:
    # A function, not a constant: Columns need an active SparkContext to exist.
    return Predicate(F.lit(value))


def all_of(preds: Sequence[Predicate]) -> Predicate:
    """Every predicate holds; an error counts unless an infallible child is already false."""
    if not preds:
        return _always(True)
    condition = _fold([p.condition for p in preds], Column.__and__)
    errors = [p.error for p in preds if p.error is not None]
    if not errors:
        return Predicate(condition)
    sure = [p.condition for p in preds if p.error is None]
    error = F.coalesce(*errors)
    if sure:
        error = F.when(_fold(sure, Column.__and__), error)
    return Predicate(condition, error)


def any_of(preds: Sequence[Predicate]) -> Predicate:
    """Some predicate holds; an error counts unless an infallible child is already true."""
    if not preds:
        return _always(False)
    condition = _fold([p.condition for p in preds], Column.__or__)
    errors = [p.error for p in preds if p.error is not None]
    if not errors:
        return Predicate(condition)
    sure = [p.condition for p in preds if p.error is None]
    error = F.coalesce(*errors)
    if sure:
        error = F.when(~_fold(sure, Column.__or__), error)
    return Predicate(condition, error)


def _fold(columns: Sequence[Column], combine: Any) -> Column:
    result = columns[0]
    for column in columns[1:]:
        result = combine(result, column)
    return result
