"""`$redact`: prune document levels with an expression yielding `$$DESCEND`, `$$PRUNE` or `$$KEEP`.

The body is any MQL expression, kept as raw JSON. A result other than the three system
variables is a per-document error (DLQ), as in MongoDB, so it is not checked here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline_stages._base import BodySpec, join_path

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$redact"
OPERATOR_NAME = "RedactOperator"


class RedactSpec(BodySpec):
    """The body of `$redact`: the raw expression."""

    expression: Any

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        return {"expression": raw}


NOT_A_REDACT_VARIABLE = (
    "$redact's expression should not return anything aside from the variables $$KEEP, "
    "$$DESCEND, and $$PRUNE, but returned "
)


def compile(spec: RedactSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """`$$KEEP` keeps the document, `$$PRUNE` drops it.

    `$$DESCEND` would re-evaluate the expression in every embedded document, which Sluice
    cannot do natively yet: such documents go to the DLQ with a reason saying so, rather than
    being passed through half-redacted.
    """
    from pyspark.sql import functions as F

    from pipeline_stages._mql import values as V
    from pipeline_stages._mql.expressions import compile_expression
    from pipeline_stages._stream.frame import failure_reason

    scope = frame.scope()
    result = compile_expression(spec.expression, scope, join_path(path, KEY), ctx.problems)
    decision = scope.bind(V.as_string(result.value))
    prepared = frame.prepared(scope)
    if result.error is not None:
        prepared = prepared.fail(
            result.error.isNotNull(), failure_reason(OPERATOR_NAME, result.error), OPERATOR_NAME
        )
    unsupported = F.lit(
        "$$DESCEND is not supported by Sluice's $redact: embedded documents are not re-evaluated"
    )
    wrong = F.concat(
        F.lit(NOT_A_REDACT_VARIABLE), F.coalesce(F.to_json(result.value), F.lit("MISSING"))
    )
    checked = prepared.fail(
        decision.eqNullSafe("descend"), failure_reason(OPERATOR_NAME, unsupported), OPERATOR_NAME
    ).fail(
        ~F.coalesce(decision.isin("keep", "prune", "descend"), F.lit(False)),
        failure_reason(OPERATOR_NAME, wrong),
        OPERATOR_NAME,
    )
    pruned = checked.drop_where(decision.eqNullSafe("prune"), keep_ticks=ctx.window_ahead)
    return pruned.finished(scope)
