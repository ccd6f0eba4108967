"""Per-document target names (`into.db`, `coll`, `path`, `topic` as expressions), in Spark.

Sluice has no Python MQL evaluator, and the expression compiler already gives Atlas's
semantics and error texts, so a computed name is compiled to a Spark column like any
`$setStreamMeta` value: it is stored in the row's stream metadata under `TARGET_META`, the
envelope carries it to the sink (`Output.target`), and the writer reads it back. An
expression that fails sends the document to the DLQ with the sink's operator name
(atlas-semantics.md §6.3 item 11); one that yields a non-string is caught by the writer.
"""

from __future__ import annotations

from typing import Any

from pipeline_stages._base import join_path
from pipeline_stages._connectors.sinks.plans import TARGET_META, computed_names
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.ops.common import first_error
from pipeline_stages._mql.ops.paths import set_field
from pipeline_stages._mql.scope import Expr
from pipeline_stages._stream.frame import StreamFrame


def prepare_frame(plan: Any, frame: StreamFrame, ctx: Any, path: str, *, key: str) -> StreamFrame:
    """The frame with the plan's computed target names in each healthy row's metadata."""
    names = computed_names(plan)
    if not names:
        return frame

    scope = frame.scope()
    meta = scope.meta
    errors = []
    for field, name in names.items():
        value = compile_expression(
            name.expression, scope, join_path(path, key, *name.pointer), ctx.problems
        )
        errors.append(value.error)
        meta = set_field(meta, f"{TARGET_META}.{field}", Expr(value=scope.bind(value.value))).value
    prepared = frame.prepared(scope)
    result = Expr(value=meta, error=first_error(*errors))
    return prepared.with_meta(result, operator=plan.operator).finished(scope)
