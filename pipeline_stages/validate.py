"""`$validate`: check documents against a validator; invalid ones are discarded or DLQ'd.

Supported Atlas fields: `validator` (required; a query filter, `$jsonSchema` and `$expr`
included, kept as raw JSON) and `validationAction` (`"discard"`, the default, or `"dlq"`).
`$where`, `$near`, `$nearSphere` and `$text` are refused in the validator, as in Atlas.
`validationAction: "dlq"` without a DLQ is an error that depends on processor options, so it
is reported by `pipeline_stages.check_options`, not here.

A DLQ record of an invalid document says which rules failed in `errInfo.details`, as
MongoDB's validation errors do: `{operatorName: "$and", clausesNotSatisfied: [{index,
details: {operatorName, specifiedAs}}]}`, where a `$jsonSchema` clause lists its failed
keywords under `schemaRulesNotSatisfied` (`_mql.query.rules` splits the validator; each rule
is compiled on its own).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator

from pipeline_stages._base import ProblemCollector, StageModel, join_path
from pipeline_stages._mql.query.rules import Rule, validator_rules
from pipeline_stages._problems import ErrorList
from pipeline_stages._stream.batch import DETAILS_MARK
from pipeline_stages.match import filter_errors

if TYPE_CHECKING:
    from pyspark.sql import Column

    from pipeline_stages._mql.scope import Scope
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
    details = rule_details(spec.validator, scope) if spec.validation_action == "dlq" else None
    checked = frame.prepared(scope)
    if predicate.error is not None:
        reason = F.concat(F.lit(ERROR_PREFIX), predicate.error)
        checked = checked.fail(predicate.error.isNotNull(), reason, OPERATOR_NAME)
    invalid = ~predicate.condition
    if spec.validation_action == "dlq":
        why = F.lit(INVALID_REASON)
        if details is not None:
            why = F.concat(F.lit(INVALID_REASON + DETAILS_MARK), details)
        checked = checked.fail(invalid, why, OPERATOR_NAME)
    else:
        checked = checked.drop_where(invalid, keep_ticks=ctx.window_ahead)
    return checked.finished(scope)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), default=str)


def rule_details(validator: dict[str, Any], scope: Scope) -> Column | None:
    """`errInfo.details` JSON text naming the rules a document fails (None: none to name).

    Rules whose filter does not compile on its own (a keyword that needs a sibling) are left
    out of the details; the whole validator still decides validity.
    """
    from pyspark.sql import functions as F

    from pipeline_stages._mql.query.compile import compile_filter

    failing: list[tuple[Rule, Column]] = []
    for rule in validator_rules(validator):
        problems = ProblemCollector()
        predicate = compile_filter(rule.filter, scope, "", problems)
        if not problems.problems:
            text = F.lit(_json(rule.details))
            failing.append((rule, F.when(~F.coalesce(predicate.condition, F.lit(True)), text)))
    if not failing:
        return None
    schema = [text for rule, text in failing if rule.schema]
    clauses = [text for rule, text in failing if not rule.schema]
    if schema:
        rules = F.concat_ws(",", *schema)
        head = '{"operatorName":"$jsonSchema","schemaRulesNotSatisfied":['
        clauses.insert(0, F.when(rules != "", F.concat(F.lit(head), rules, F.lit("]}"))))
    indexed = [
        F.when(c.isNotNull(), F.concat(F.lit(f'{{"index":{i},"details":'), c, F.lit("}")))
        for i, c in enumerate(clauses)
    ]
    body = F.concat_ws(",", *indexed)
    return F.concat(F.lit('{"operatorName":"$and","clausesNotSatisfied":['), body, F.lit("]}"))
