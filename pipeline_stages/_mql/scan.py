"""Unknown and unsupported MQL operators, found in a pipeline's raw JSON without Spark.

The compilers report these too, but only once Spark runs; `parse_pipeline` calls
`scan_pipeline` so that they come with every other parse problem, in one pass and in about a
second, also when the pipeline has structural problems elsewhere. The walk follows where the
compilers read expressions and filters, and reports at the same paths with the same codes and
messages (`expressions._operator`, `query.ops._unknown`, `query.compile._Compiler.operator`).
Anything it does not reach is still checked by the compilers.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from typing import Any

from pipeline_stages._base import WINDOW_STAGE_KEYS, Problem, ProblemCode, join_path
from pipeline_stages._mql.names import (
    DOCUMENT_LEVEL,
    EXPRESSION_EJSON_KEYS,
    EXPRESSION_OPERATORS,
    LOGICAL,
    QUERY_EJSON_KEYS,
    QUERY_FIELD_OPERATORS,
    TOP_LEVEL,
    UNSUPPORTED_EXPRESSION_OPERATORS,
    UNSUPPORTED_QUERY_OPERATORS,
)

#: Accumulators whose argument is an object naming the expression they evaluate.
_ARGUMENT_FIELD = {
    "$top": "output", "$bottom": "output", "$topN": "output", "$bottomN": "output",
    "$firstN": "input", "$lastN": "input", "$maxN": "input", "$minN": "input",
    "$percentile": "input", "$median": "input",
}  # fmt: skip


def _hint(name: str, known: Any) -> str:
    match = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean '{match[0]}'?" if match else ""


class _Scan:
    """One walk over a pipeline, collecting problems."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []

    def fail(self, path: str, code: str, message: str) -> None:
        self.problems.append(Problem(code=str(code), path=path, message=message))

    # ---------------------------------------------------------------- expressions

    def expression(self, expr: Any, path: str) -> None:
        if isinstance(expr, list):
            for index, item in enumerate(expr):
                self.expression(item, join_path(path, index))
            return
        if not isinstance(expr, dict) or not expr:
            return
        first = next(iter(expr))
        if not isinstance(first, str) or (first in EXPRESSION_EJSON_KEYS and len(expr) == 1):
            return
        if not first.startswith("$"):
            for name, sub in expr.items():
                self.expression(sub, join_path(path, name))
            return
        if len(expr) != 1:
            return  # the compiler reports the malformed operator object
        self.operator(first, expr[first], join_path(path, first))

    def operator(self, op: str, argument: Any, path: str) -> None:
        if op in EXPRESSION_OPERATORS:
            if op != "$literal":
                self.expression(argument, path)
        elif op in UNSUPPORTED_EXPRESSION_OPERATORS:
            message = f"expression operator '{op}' is not supported"
            self.fail(path, ProblemCode.UNSUPPORTED_OPTION, message)
        else:
            known = [*EXPRESSION_OPERATORS, *UNSUPPORTED_EXPRESSION_OPERATORS]
            message = f"Unrecognized expression '{op}'{_hint(op, known)}"
            self.fail(path, ProblemCode.UNKNOWN_OPERATOR, message)

    def fields(self, fields: Any, path: str) -> None:
        """`{a: <expr>, b: {c: <expr>}}` (`$addFields`, `$project`, ...)."""
        if isinstance(fields, Mapping):
            for name, value in fields.items():
                self.expression(value, join_path(path, name))

    # ---------------------------------------------------------------- query filters

    def filter(self, document: Any, path: str, *, top: bool = True) -> None:
        if not isinstance(document, Mapping):
            return
        for key, value in document.items():
            here = join_path(path, key)
            if not isinstance(key, str) or not key.startswith("$"):
                self.field(value, here)
            elif key in LOGICAL and isinstance(value, list):
                for index, child in enumerate(value):
                    self.filter(child, join_path(here, index), top=top)
            elif key == "$expr" and top:
                self.expression(value, here)
            elif key in TOP_LEVEL:
                continue
            elif key in UNSUPPORTED_QUERY_OPERATORS:
                message = f"{key} is not supported in stream processing filters"
                self.fail(here, ProblemCode.UNSUPPORTED_OPTION, message)
            else:
                message = f"unknown top level operator: {key}{_hint(key, TOP_LEVEL)}"
                self.fail(here, ProblemCode.UNKNOWN_OPERATOR, message)

    def field(self, value: Any, path: str) -> None:
        if not isinstance(value, dict) or not value:
            return
        first = next(iter(value))
        is_ejson = len(value) == 1 and first in QUERY_EJSON_KEYS
        if isinstance(first, str) and first.startswith("$") and not is_ejson:
            self.query_operators(value, path)

    def query_operators(self, ops: Mapping[str, Any], path: str) -> None:
        for key, argument in ops.items():
            here = join_path(path, key)
            if key == "$options":
                continue
            if key == "$not":
                if isinstance(argument, dict) and argument and "$regularExpression" not in argument:
                    self.query_operators(argument, here)
            elif key == "$elemMatch":
                self.elem_match(argument, here)
            elif key in QUERY_FIELD_OPERATORS:
                continue
            elif key in UNSUPPORTED_QUERY_OPERATORS:
                self.fail(here, ProblemCode.UNSUPPORTED_OPTION, f"{key} is not supported by Sluice")
            else:
                known = [*QUERY_FIELD_OPERATORS, "$options"]
                message = f"unknown operator: {key}{_hint(key, known)}"
                self.fail(here, ProblemCode.UNKNOWN_OPERATOR, message)

    def elem_match(self, argument: Any, path: str) -> None:
        if not isinstance(argument, dict):
            return
        first = next(iter(argument), "")
        if isinstance(first, str) and first.startswith("$") and first not in DOCUMENT_LEVEL:
            self.query_operators(argument, path)
        else:
            self.filter(argument, path, top=False)

    # ---------------------------------------------------------------- stages

    def stages(self, raw: Any, path: str) -> None:
        if not isinstance(raw, list):
            return
        for index, stage in enumerate(raw):
            if isinstance(stage, dict) and len(stage) == 1:
                key, body = next(iter(stage.items()))
                handler = _STAGES.get(key) or (_window if key in WINDOW_STAGE_KEYS else None)
                if handler is not None:
                    handler(self, body, join_path(path, index, key))

    def group(self, body: Any, path: str) -> None:
        if not isinstance(body, Mapping):
            return
        for name, value in body.items():
            if name == "_id":
                self.expression(value, join_path(path, "_id"))
            elif isinstance(value, dict) and len(value) == 1:
                op, argument = next(iter(value.items()))
                if op == "$count":
                    continue
                field = _ARGUMENT_FIELD.get(op)
                if field is not None:
                    argument = argument.get(field) if isinstance(argument, dict) else None
                self.expression(argument, join_path(path, name, op))


def _body_field(name: str, walk: Callable[[_Scan, Any, str], None]) -> Any:
    def handler(scan: _Scan, body: Any, path: str) -> None:
        if isinstance(body, Mapping) and name in body:
            walk(scan, body[name], join_path(path, name))

    return handler


def _window(scan: _Scan, body: Any, path: str) -> None:
    if isinstance(body, Mapping):
        scan.stages(body.get("pipeline"), join_path(path, "pipeline"))
        if "partitionBy" in body:
            scan.expression(body["partitionBy"], join_path(path, "partitionBy"))


def _https(scan: _Scan, body: Any, path: str) -> None:
    if not isinstance(body, Mapping):
        return
    target = body.get("path")
    if target is not None and not (isinstance(target, str) and not target.startswith("$")):
        scan.expression(target, join_path(path, "path"))
    scan.fields(body.get("parameters"), join_path(path, "parameters"))
    scan.fields(body.get("headers"), join_path(path, "headers"))
    scan.stages(body.get("payload"), join_path(path, "payload"))


_STAGES: dict[str, Callable[[_Scan, Any, str], None]] = {
    "$source": _body_field("timeField", _Scan.expression),
    "$match": _Scan.filter,
    "$validate": _body_field("validator", _Scan.filter),
    "$addFields": _Scan.fields,
    "$set": _Scan.fields,
    "$project": _Scan.fields,
    "$setStreamMeta": _Scan.fields,
    "$replaceRoot": _body_field("newRoot", _Scan.expression),
    "$replaceWith": _Scan.expression,
    "$redact": _Scan.expression,
    "$group": _Scan.group,
    "$lookup": _body_field("let", _Scan.fields),
    "$https": _https,
}


def scan_pipeline(raw: Any, path: str = "/pipeline") -> list[Problem]:
    """Every unknown or unsupported operator in a pipeline's expressions and filters."""
    scan = _Scan()
    scan.stages(raw, path)
    return scan.problems
