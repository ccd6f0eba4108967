"""The Spark side of `$lookup` and `$cachedLookup`: keys in Spark, the join on the executors.

Spark computes each healthy document's local key (and `let` values) as Extended JSON text,
`mapInArrow` hands every partition of the micro-batch to `lookup_runner.LookupJob` (one
batched store query per partition), and Spark writes the JSON array it returns into the
`as` field with the same field-setting code as `$addFields`. A row whose key or result cannot
be read goes to the DLQ; the rest of the stream goes on. Nothing is collected on the driver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._enrichment.lookup_runner import (
    ERROR,
    HEALTHY,
    LET_PREFIX,
    LOCAL,
    RESULT,
    CacheConfig,
    LookupJob,
)
from pipeline_stages._enrichment.operator_stats import CACHE_HIT, LATENCY_MS, observe_operator
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.ops.paths import set_field
from pipeline_stages._mql.scope import Expr
from pipeline_stages._stream.frame import DOC, StreamFrame

if TYPE_CHECKING:
    from pyspark.sql import Column

    from pipeline_stages._stream.context import CompileContext

#: Connection types whose collections a lookup can read.
LOOKUP_CONNECTION_TYPES = frozenset({"Local", "Cluster"})


def compile_lookup(
    spec: Any, frame: StreamFrame, ctx: CompileContext, path: str, *, key: str, operator: str
) -> StreamFrame:
    """Compile a `LookupSpec` or `CachedLookupSpec` (`key` is the stage's Atlas key)."""
    stage_path = join_path(path, key)
    if not _connection_ok(spec, ctx, stage_path):
        return frame
    scope = frame.scope()
    columns: dict[str, Column] = {HEALTHY: frame.healthy}
    local_field = spec.local_field
    if local_field is not None:
        local = compile_expression(
            "$" + local_field, scope, join_path(stage_path, "localField"), ctx.problems
        )
        columns[LOCAL] = F.to_json(local.value)
    else:
        columns[LOCAL] = F.lit(None).cast("string")
    let = getattr(spec, "let", None) or {}
    for index, (name, raw) in enumerate(let.items()):
        value = compile_expression(raw, scope, join_path(stage_path, "let", name), ctx.problems)
        columns[f"{LET_PREFIX}{index}"] = F.to_json(value.value)
    prepared = frame.prepared(scope)
    df = prepared.df.withColumns(columns)
    schema = StructType(
        [
            *df.schema.fields,
            StructField(RESULT, StringType()),
            StructField(ERROR, StringType()),
            StructField(LATENCY_MS, DoubleType()),
            StructField(CACHE_HIT, IntegerType()),
        ]
    )
    answered = df.mapInArrow(_job(spec, ctx, path=path), schema)
    cached = getattr(spec, "ttl", None) is not None
    answered = observe_operator(
        answered, operator=operator, path=path, healthy=HEALTHY, error=ERROR, cached=cached
    )
    joined = StreamFrame(answered.drop(LATENCY_MS, CACHE_HIT))
    matches = Expr(value=F.parse_json(F.col(RESULT)))
    result = Expr(value=set_field(F.col(DOC), spec.as_, matches).value, error=F.col(ERROR))
    done = joined.with_doc(result, operator=operator).finished(scope)
    return StreamFrame(done.df.drop(*columns, RESULT, ERROR))


def _connection_ok(spec: Any, ctx: CompileContext, stage_path: str) -> bool:
    name = spec.from_.connection_name
    info = ctx.connection(name)
    where = join_path(stage_path, "from", "connectionName")
    if info is None:
        ctx.problems.error(where, ProblemCode.UNKNOWN_CONNECTION, f"Unknown connection '{name}'")
        return False
    if info.type not in LOOKUP_CONNECTION_TYPES:
        ctx.problems.error(
            where,
            ProblemCode.INVALID_VALUE,
            f"Connection '{name}' is a {info.type} connection; a lookup reads a collection of "
            "'local' or of a Cluster connection",
        )
        return False
    if ctx.lookup_stores is None:
        ctx.problems.error(
            stage_path,
            ProblemCode.UNSUPPORTED_OPTION,
            "this run has no store for lookups (the runner did not provide one)",
        )
        return False
    return True


def _job(spec: Any, ctx: CompileContext, *, path: str) -> LookupJob:
    ttl = getattr(spec, "ttl", None)
    cache = (
        None
        if ttl is None
        else CacheConfig(
            name=f"{ctx.processor_name}{path}",
            ttl_ms=ttl.ms,
            max_bytes=spec.max_mem_usage_bytes,
        )
    )
    let = getattr(spec, "let", None) or {}
    return LookupJob(
        stores=ctx.lookup_stores,
        connection=spec.from_.connection_name,
        db=spec.from_.db,
        coll=spec.from_.coll,
        local_field=spec.local_field,
        foreign_field=spec.foreign_field,
        let_names=tuple(let),
        pipeline=tuple(getattr(spec, "pipeline", None) or ()),
        cache=cache,
    )
