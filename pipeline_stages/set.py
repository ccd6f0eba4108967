"""`$set`: an alias of `$addFields` with the same rules and the same DLQ operator name.

MongoDB defines `$set` as `$addFields`; Atlas reports its per-document errors as
`AddFieldsOperator`.
"""

from __future__ import annotations

from pipeline_stages.add_fields import AddFieldsSpec

KEY = "$set"
OPERATOR_NAME = "AddFieldsOperator"


class SetSpec(AddFieldsSpec):
    """The body of `$set`: output field path → raw MQL expression."""

    @classmethod
    def _stage_name(cls) -> str:
        return KEY
