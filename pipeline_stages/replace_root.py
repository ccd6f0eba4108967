"""`$replaceRoot`: replace each document by the result of the `newRoot` expression.

Supported Atlas field: `newRoot` (required; an MQL expression kept as raw JSON). A `newRoot`
that does not evaluate to an object is a per-document error (DLQ), as in Atlas, so it is not
checked here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from pipeline_stages._base import StageModel, join_path

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$replaceRoot"
OPERATOR_NAME = "ReplaceRootOperator"


class ReplaceRootSpec(StageModel):
    """The body of `$replaceRoot`."""

    new_root: Any = Field(alias="newRoot")


def compile(
    spec: ReplaceRootSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> StreamFrame:  # noqa: A001
    """Replace healthy documents by `newRoot`; non-object results go to the DLQ."""
    from pipeline_stages._stream.stateless import apply_document, replace_root

    body = join_path(path, KEY, "newRoot")
    return apply_document(
        frame,
        lambda scope: replace_root(spec.new_root, scope, body, ctx.problems),
        operator=OPERATOR_NAME,
    )
