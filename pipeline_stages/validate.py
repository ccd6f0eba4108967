"""`$validate`: check documents against a validator; invalid ones are discarded or DLQ'd.

Supported Atlas fields: `validator` (required; a query filter, `$jsonSchema` and `$expr`
included, kept as raw JSON) and `validationAction` (`"discard"`, the default, or `"dlq"`).
`$where`, `$near`, `$nearSphere` and `$text` are refused in the validator, as in Atlas.
`validationAction: "dlq"` without a DLQ is an error that depends on processor options, so it
is reported by `pipeline_stages.check_options`, not here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from pipeline_stages._base import StageModel, join_path
from pipeline_stages._problems import ErrorList
from pipeline_stages.match import filter_errors

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


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


INVALID_REASON = "Input document found to be invalid in $validate stage"
ERROR_PREFIX = "Failed to process input document in $validate stage with error: "


def compile(spec: ValidateSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Drop (`discard`) or dead-letter (`dlq`) the healthy documents failing the validator.

    A validator that cannot be evaluated for a document (an `$expr` error) always sends it to
    the DLQ, with Atlas's reason text (§3.2).
    """
    from pyspark.sql import functions as F

    from pipeline_stages._mql.query.compile import compile_filter

    scope = frame.scope()
    predicate = compile_filter(
        spec.validator, scope, join_path(path, KEY, "validator"), ctx.problems
    )
    checked = frame.prepared(scope)
    if predicate.error is not None:
        reason = F.concat(F.lit(ERROR_PREFIX), predicate.error)
        checked = checked.fail(predicate.error.isNotNull(), reason, OPERATOR_NAME)
    invalid = ~predicate.condition
    if spec.validation_action == "dlq":
        checked = checked.fail(invalid, F.lit(INVALID_REASON), OPERATOR_NAME)
    else:
        checked = checked.drop_where(invalid, keep_ticks=ctx.window_ahead)
    return checked.finished(scope)
