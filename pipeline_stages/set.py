"""`$set`: an alias of `$addFields` with the same rules and the same DLQ operator name.

MongoDB defines `$set` as `$addFields`; Atlas reports its per-document errors as
`AddFieldsOperator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline_stages._base import join_path
from pipeline_stages.add_fields import AddFieldsSpec

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$set"
OPERATOR_NAME = "AddFieldsOperator"


class SetSpec(AddFieldsSpec):
    """The body of `$set`: output field path → raw MQL expression."""

    @classmethod
    def _stage_name(cls) -> str:
        return KEY


def compile(spec: SetSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Set every field of healthy documents; an expression error sends the document to the DLQ."""
    from pipeline_stages._stream.stateless import compile_add_fields

    return compile_add_fields(spec.fields, frame, ctx, join_path(path, KEY), operator=OPERATOR_NAME)
