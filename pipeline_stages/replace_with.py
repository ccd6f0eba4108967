"""`$replaceWith`: `$replaceRoot` whose body is the `newRoot` expression itself.

The body is any MQL expression, kept as raw JSON. MongoDB defines `$replaceWith` as an alias
of `$replaceRoot`, hence the DLQ operator name `ReplaceRootOperator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline_stages._base import BodySpec, join_path

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$replaceWith"
OPERATOR_NAME = "ReplaceRootOperator"


class ReplaceWithSpec(BodySpec):
    """The body of `$replaceWith`: the raw `newRoot` expression."""

    new_root: Any

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        return {"new_root": raw}


def compile(
    spec: ReplaceWithSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> StreamFrame:  # noqa: A001
    """`$replaceWith` is `$replaceRoot` with the expression as the whole body."""
    from pipeline_stages._stream.stateless import apply_document, replace_root

    body = join_path(path, KEY)
    return apply_document(
        frame,
        lambda scope: replace_root(spec.new_root, scope, body, ctx.problems),
        operator=OPERATOR_NAME,
    )
