"""`$addFields`: add or overwrite fields with expression values.

The body maps output field paths (dotted paths allowed) to MQL expressions, kept as raw JSON
in the order written. Field paths must not be empty, start with `$` or contain empty
segments, and a path may not also be a prefix of another one (`a` and `a.b`: MongoDB's path
collision). An empty body is accepted (a no-op, as in MongoDB).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline_stages._base import (
    BodySpec,
    ProblemCode,
    describe,
    field_name_problem,
    join_path,
    path_collisions,
)
from pipeline_stages._problems import ErrorList

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$addFields"
OPERATOR_NAME = "AddFieldsOperator"


def field_map_errors(raw: Any, errors: ErrorList, *, what: str) -> None:
    """Record errors for a `{path: expression}` body (shape, names, collisions)."""
    if not isinstance(raw, dict):
        errors.add(
            (),
            "dict_type",
            f"{what} takes an object of field: expression, got {describe(raw)}",
            raw,
        )
        return
    for name in raw:
        if problem := field_name_problem(name, dotted=True):
            errors.add((name,), ProblemCode.INVALID_VALUE, problem, name)
    for path, earlier in path_collisions(list(raw)):
        errors.add(
            (path,),
            ProblemCode.INVALID_COMBINATION,
            f"Path collision: {describe(path)} overlaps {describe(earlier)}",
            path,
        )


class AddFieldsSpec(BodySpec):
    """The body of `$addFields`: output field path → raw MQL expression."""

    fields: dict[str, Any]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        field_map_errors(raw, errors, what=cls._stage_name())
        errors.raise_if_any(cls.__name__)
        return {"fields": raw}

    @classmethod
    def _stage_name(cls) -> str:
        return KEY


def compile(spec: AddFieldsSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Set every field of healthy documents; an expression error sends the document to the DLQ."""
    from pipeline_stages._stream.stateless import compile_add_fields

    return compile_add_fields(spec.fields, frame, ctx, join_path(path, KEY), operator=OPERATOR_NAME)
