"""`$set`: an alias of `$addFields` with the same rules and the same DLQ operator name.

MongoDB defines `$set` as `$addFields`; Atlas reports its per-document errors as
`AddFieldsOperator`.
"""

from __future__ import annotations

from typing import Any

from pipeline_stages.add_fields import AddFieldsSpec

KEY = "$set"
OPERATOR_NAME = "AddFieldsOperator"


class SetSpec(AddFieldsSpec):
    """The body of `$set`: output field path → raw MQL expression."""

    @classmethod
    def _stage_name(cls) -> str:
        return KEY


def compile(spec: SetSpec, frame: Any, ctx: Any, path: str) -> Any:  # noqa: A001
    """`$set` is `$addFields` under another name."""
    from pipeline_stages._base import join_path
    from pipeline_stages._stateless import add_fields, apply_document

    body = join_path(path, KEY)
    return apply_document(
        frame,
        lambda scope: add_fields(spec.fields, scope, scope.current, body, ctx.problems),
        operator=OPERATOR_NAME,
    )
