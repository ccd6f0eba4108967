"""Native compilation of the values the window operator aggregates or partitions by.

For a first blocking `$group` (or `$count`), the `_id` and every accumulator's inputs are
compiled to typed value columns (`spark.inner.value_columns`); a document whose `_id` or
argument fails is flagged as failed in the window with Atlas's `GroupOperator` reason. The
static accumulator parameters (`n`, `sortBy`, `p`) are checked here with the same accumulator
classes the operator runs, so a bad one is a compile problem, not a runtime failure.

For `$sessionWindow` and `$slidingWindow`, `partitionBy` is compiled the same way; a failing
partition expression sends the document to the DLQ on arrival.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._mql import kinds as K
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.scope import Scope
from pipeline_stages._stream.frame import DOC, META, StreamFrame
from pipeline_stages._windowing.accumulators import make_accumulator
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.config import MERGE_INVALID
from pipeline_stages._windowing.spark.inner import (
    InnerStage,
    json_or_null,
    value_columns,
)

_ROOT = ("$$ROOT", "$$CURRENT")


def _input_exprs(op: str, argument: Any, path: str, problems: Any) -> tuple[Any, tuple[str, ...]]:
    """The argument expression and `sortBy` fields of one accumulator (None: no argument)."""
    try:
        acc = make_accumulator(op, argument)
    except ValueError as error:
        problems.error(path, ProblemCode.INVALID_ARGUMENTS, str(error))
        return None, ()
    if op == "$count":
        return None, ()
    fields = tuple(name for name, _ in getattr(acc, "sort_fields", ()))
    return acc.input_expr, fields


def _group_parts(stage: InnerStage) -> tuple[Any, list[tuple[str, str, Any]], str | None]:
    """`(_id expression, [(name, op, argument)], count field)` of `$group` or `$count`."""
    if stage.key == "$count":
        return None, [(stage.spec.field, "$sum", 1)], stage.spec.field
    accs = [(name, a.operator, a.argument) for name, a in stage.spec.accumulators.items()]
    return stage.spec.id, accs, None


def compile_group(
    frame: StreamFrame, stage: InnerStage, problems: Any
) -> tuple[StreamFrame, C.GroupPlan]:
    """Add the group key (`KEY`) and typed accumulator inputs; flag failing documents."""
    id_expr, accs, count_field = _group_parts(stage)
    body = join_path(stage.path, stage.key)
    scope = frame.scope()
    key = compile_expression(id_expr, scope, join_path(body, "_id"), problems)
    key_value = scope.bind(key.value)
    errors: list[Column] = [key.error] if key.error is not None else []
    columns: dict[str, Column] = {}
    invalid: list[Column] = []
    plans = []
    shared: dict[str, C.ValueColumns] = {}  # one set of columns per distinct input expression
    for index, (name, op, argument) in enumerate(accs):
        where = join_path(body, name, op)
        expr, sort_fields = _input_exprs(op, argument, where, problems)
        inputs = []
        sources = [] if expr is None else [expr, *(f"${field}" for field in sort_fields)]
        for n, source in enumerate(sources):
            compiled = compile_expression(source, scope, where, problems)
            if compiled.error is not None:
                errors.append(compiled.error)
            text = json.dumps(source, sort_keys=True, default=str)
            target = shared.get(text)
            if target is None:
                target = shared[text] = C.ValueColumns(f"__w_a{index}_{n}")
                columns.update(value_columns(compiled.value, target, scope))
            inputs.append(target)
            if op == "$mergeObjects" and n == 0:
                kind = scope.bind(K.kind_of(scope.bind(compiled.value)))
                bad = ~kind.isin("object", "null", "missing")
                invalid.append(F.when(bad, F.lit(f"{MERGE_INVALID}{index}")))
        plans.append(
            C.AccumulatorPlan(
                name=name,
                op=op,
                spec=argument,
                inputs=tuple(inputs),
                sort_fields=sort_fields,
                root_input=isinstance(expr, str) and expr.split(".")[0] in _ROOT,
            )
        )
    frame = frame.prepared(scope)
    df = frame.df.withColumns({**columns, C.KEY: json_or_null(key_value)})
    failure = _first(errors, invalid)
    frame = _fail_group(StreamFrame(df), failure).finished(scope)
    return frame, C.GroupPlan(accumulators=tuple(plans), count_field=count_field)


def _first(errors: list[Column], invalid: list[Column]) -> Column | None:
    """The first expression error, else the first `$mergeObjects` placeholder."""
    reasons = [
        F.concat(F.lit(f"Failed to process input document in {C.GROUP_OPERATOR} with error: "), e)
        for e in errors
    ]
    found = reasons + invalid
    return F.coalesce(*found) if found else None


def _fail_group(frame: StreamFrame, failure: Column | None) -> StreamFrame:
    if failure is None:
        return frame
    df = frame.df.withColumn("__w_gfail", F.when(F.col(C.FLAG) == C.FLAG_OK, failure))
    fails = F.col("__w_gfail").isNotNull()
    df = df.withColumns(
        {
            C.FLAG: F.when(fails, F.lit(C.FLAG_FAILED_INSIDE).cast("tinyint")).otherwise(
                F.col(C.FLAG)
            ),
            C.FDOC: F.when(fails, F.to_json(F.col(DOC))).otherwise(F.col(C.FDOC)),
            C.FMETA: F.when(fails, F.to_json(F.col(META))).otherwise(F.col(C.FMETA)),
            C.REASON: F.when(fails, F.col("__w_gfail")).otherwise(F.col(C.REASON)),
            C.OPERATOR: F.when(fails, F.lit(C.GROUP_OPERATOR)).otherwise(F.col(C.OPERATOR)),
        }
    )
    return StreamFrame(df.drop("__w_gfail"))


def compile_partition(
    frame: StreamFrame, partition_by: Any, *, path: str, operator: str, problems: Any
) -> StreamFrame:
    """Add the partition key (`PKEY`); a failing `partitionBy` DLQs the document on arrival."""
    if partition_by is None:
        return StreamFrame(frame.df.withColumn(C.PKEY, F.lit("null")))
    scope: Scope = frame.scope()
    compiled = compile_expression(partition_by, scope, path, problems)
    value = scope.bind(compiled.value)
    frame = frame.prepared(scope)
    df = frame.df.withColumn(C.PKEY, json_or_null(value))
    if compiled.error is not None:
        reason = F.concat(
            F.lit(f"Failed to process input document in {operator} with error: "),
            compiled.error,
        )
        df = df.withColumn("__w_pfail", F.when(F.col(C.FLAG) == C.FLAG_OK, reason))
        fails = F.col("__w_pfail").isNotNull()
        df = df.withColumns(
            {
                C.FLAG: F.when(fails, F.lit(C.FLAG_FAILED_BEFORE).cast("tinyint")).otherwise(
                    F.col(C.FLAG)
                ),
                C.FDOC: F.when(fails, F.to_json(F.col(DOC))).otherwise(F.col(C.FDOC)),
                C.FMETA: F.when(fails, F.to_json(F.col(META))).otherwise(F.col(C.FMETA)),
                C.REASON: F.when(fails, F.col("__w_pfail")).otherwise(F.col(C.REASON)),
                C.OPERATOR: F.when(fails, F.lit(operator)).otherwise(F.col(C.OPERATOR)),
            }
        ).drop("__w_pfail")
    return StreamFrame(df).finished(scope)
