"""`$unset`: remove fields; a string or a non-empty array of strings.

Each entry is a field path (dotted allowed) that must not be empty, start with `$` or contain
empty segments. MongoDB defines `$unset` as an exclusion `$project`, hence the DLQ operator
name `ProjectOperator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline_stages._base import BodySpec, ProblemCode, describe, field_name_problem
from pipeline_stages._problems import ErrorList

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$unset"
OPERATOR_NAME = "ProjectOperator"


class UnsetSpec(BodySpec):
    """The body of `$unset`, normalised to a tuple of field paths."""

    fields: tuple[str, ...]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        if isinstance(raw, str):
            if problem := field_name_problem(raw, dotted=True):
                errors.add((), ProblemCode.INVALID_VALUE, problem, raw)
            names: list[Any] = [raw]
        elif isinstance(raw, list) and raw:
            names = raw
            for index, name in enumerate(raw):
                if not isinstance(name, str):
                    errors.add(
                        (index,),
                        "string_type",
                        f"$unset entries must be strings, got {describe(name)}",
                        name,
                    )
                elif problem := field_name_problem(name, dotted=True):
                    errors.add((index,), ProblemCode.INVALID_VALUE, problem, name)
        else:
            errors.add(
                (),
                "string_type",
                f"$unset takes a field path or a non-empty array of field paths, got {describe(raw)}",
                raw,
            )
            names = []
        errors.raise_if_any(cls.__name__)
        return {"fields": tuple(names)}


def compile(spec: UnsetSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001, ARG001
    """Remove the fields from healthy documents (cannot fail)."""
    from pipeline_stages._mql.scope import Expr
    from pipeline_stages._stream.stateless import apply_document, unset_fields

    return apply_document(
        frame,
        lambda scope: Expr(value=unset_fields(scope.current, list(spec.fields))),
        operator=OPERATOR_NAME,
    )
