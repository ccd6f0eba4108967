"""`$setStreamMeta`: set custom stream metadata, readable with `{$meta: "stream.<field>"}`.

The body maps `stream.<field>` paths to MQL expressions (raw JSON, order kept). Every key
must start with `stream.` and name a field after it. [INF] The system metadata written by
the engine (`stream.source`, `stream.window`, `stream.https`) cannot be overwritten; Sluice
refuses those keys rather than let a pipeline forge source or window metadata. Main pipeline
only. A failing expression sends the document to the DLQ.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline_stages._base import BodySpec, ProblemCode, describe, field_name_problem, join_path
from pipeline_stages._problems import ErrorList

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$setStreamMeta"
OPERATOR_NAME = "SetStreamMetaOperator"

PREFIX = "stream."
RESERVED = frozenset({"source", "window", "https"})


def _key_problem(key: str) -> str | None:
    if not key.startswith(PREFIX):
        return f"$setStreamMeta keys must start with 'stream.', got {describe(key)}"
    rest = key[len(PREFIX) :]
    if problem := field_name_problem(rest, dotted=True):
        return problem
    if rest.split(".")[0] in RESERVED:
        return f"{describe(key)} is system metadata and cannot be set"
    return None


class SetStreamMetaSpec(BodySpec):
    """The body of `$setStreamMeta`: `stream.<path>` → raw expression."""

    fields: dict[str, Any]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        if not isinstance(raw, dict):
            errors.add(
                (),
                "dict_type",
                f"$setStreamMeta takes an object of 'stream.<field>': expression, got {describe(raw)}",
                raw,
            )
        elif not raw:
            errors.add((), "too_short", "$setStreamMeta must set at least one field, got {}", raw)
        else:
            for key in raw:
                if problem := _key_problem(key):
                    errors.add((key,), ProblemCode.INVALID_VALUE, problem, key)
        errors.raise_if_any(cls.__name__)
        return {"fields": raw}


def compile(
    spec: SetStreamMetaSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> StreamFrame:  # noqa: A001
    """Set custom stream metadata (`{$meta: "stream.<field>"}`); errors go to the DLQ."""
    from pipeline_stages._mql.expressions import compile_expression
    from pipeline_stages._mql.ops.common import first_error
    from pipeline_stages._mql.ops.paths import set_field
    from pipeline_stages._mql.scope import Expr

    scope = frame.scope()
    meta = scope.meta
    errors = []
    for key, raw in spec.fields.items():
        value = compile_expression(raw, scope, join_path(path, KEY, key), ctx.problems)
        errors.append(value.error)
        meta = set_field(meta, key.removeprefix("stream."), Expr(value=value.value)).value
    prepared = frame.prepared(scope)
    result = Expr(value=meta, error=first_error(*errors))
    return prepared.with_meta(result, operator=OPERATOR_NAME).finished(scope)
