"""`$validate`: check documents against a validator; invalid ones are discarded or DLQ'd.

Supported Atlas fields: `validator` (required; a query filter, `$jsonSchema` and `$expr`
included, kept as raw JSON) and `validationAction` (`"discard"`, the default, or `"dlq"`).
`$where`, `$near`, `$nearSphere` and `$text` are refused in the validator, as in Atlas.
`validationAction: "dlq"` without a DLQ is an error that depends on processor options, so it
is reported by `pipeline_stages.check_options`, not here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from pipeline_stages._base import StageModel
from pipeline_stages._problems import ErrorList
from pipeline_stages.match import filter_errors

KEY = "$validate"
OPERATOR_NAME = "ValidateOperator"


class ValidateSpec(StageModel):
    """The body of `$validate`."""

    validator: dict[str, Any]
    validation_action: Literal["discard", "dlq"] = Field(
        default="discard", alias="validationAction"
    )

    @field_validator("validator", mode="before")
    @classmethod
    def _filter_shape(cls, value: Any) -> Any:
        errors = ErrorList()
        filter_errors(value, errors, what="validator")
        errors.raise_if_any(cls.__name__)
        return value
