"""The Spark side of `$https` in the middle of a pipeline.

Spark evaluates the request parts of each healthy document (`path`, `parameters`, `headers`
as JSON text; the body: the `payload` pipeline's result, or the document itself for POST, PUT
and PATCH without a payload), `mapInArrow` runs `https_runner.HttpsJob` on every partition,
and the response is written into `as` with the same field-setting code as `$addFields`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._connectors.http_client import HttpPolicy
from pipeline_stages._enrichment.https_runner import (
    BODY,
    ERROR,
    HEADER_PREFIX,
    HEALTHY,
    PARAM_PREFIX,
    PATH,
    RESULT,
    HttpsJob,
    names,
)
from pipeline_stages._enrichment.operator_stats import LATENCY_MS, observe_operator
from pipeline_stages._entry import entry_of
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.ops.paths import set_field
from pipeline_stages._mql.scope import Expr
from pipeline_stages._stream.frame import DOC, StreamFrame

if TYPE_CHECKING:
    from pyspark.sql import Column

    from pipeline_stages._stream.context import CompileContext, ConnectionInfo

ORIGINAL = "__https_original__"
#: Requests in flight per partition.
CONCURRENCY = 16


def https_connection(name: str, ctx: CompileContext, where: str) -> ConnectionInfo | None:
    """The `Https` connection named `name`, or None with a problem recorded at `where`."""
    info = ctx.connection(name)
    if info is None:
        ctx.problems.error(where, ProblemCode.UNKNOWN_CONNECTION, f"Unknown connection '{name}'")
        return None
    if info.type != "Https" or not isinstance(info.config.get("url"), str):
        ctx.problems.error(
            where,
            ProblemCode.INVALID_VALUE,
            f"Connection '{name}' is a {info.type} connection; $https needs an Https connection",
        )
        return None
    return info


def policy_of(spec: Any) -> HttpPolicy:
    """The HTTP policy of a `HttpsSpec`'s `config`."""
    config = spec.config
    return HttpPolicy(
        connect_timeout_s=config.connection_timeout_sec,
        request_timeout_s=config.request_timeout_sec,
        max_retries=config.max_retries,
        backoff_ms=config.retry_backoff_ms,
        concurrency=CONCURRENCY,
    )


def compile_https(
    spec: Any, frame: StreamFrame, ctx: CompileContext, path: str, *, key: str, operator: str
) -> StreamFrame:
    """Compile a mid-pipeline `HttpsSpec` (`key` is `$https`)."""
    stage_path = join_path(path, key)
    info = https_connection(spec.connection_name, ctx, join_path(stage_path, "connectionName"))
    if info is None:
        return frame
    with_body = _with_body(spec, frame, ctx, stage_path)
    scope = with_body.scope()
    columns = _request_columns(spec, scope, ctx, stage_path, healthy=with_body.healthy)
    prepared = with_body.prepared(scope)
    df = prepared.df.withColumns(columns)
    schema = StructType(
        [
            *df.schema.fields,
            StructField(RESULT, StringType()),
            StructField(ERROR, StringType()),
            StructField(LATENCY_MS, DoubleType()),
        ]
    )
    job = HttpsJob(
        url=str(info.config["url"]),
        connection_headers={str(k): str(v) for k, v in (info.config.get("headers") or {}).items()},
        method=spec.method,
        static_path=spec.path
        if isinstance(spec.path, str) and not spec.path.startswith("$")
        else None,
        param_names=names(spec.parameters),
        header_names=names(spec.headers),
        policy=policy_of(spec),
        on_error=spec.on_error,
        parse_json_strings=spec.config.parse_json_strings,
    )
    observed = observe_operator(
        df.mapInArrow(job, schema),
        operator=operator,
        path=path,
        healthy=HEALTHY,
        error=ERROR,
        cached=False,
    )
    answered = StreamFrame(observed.drop(LATENCY_MS))
    result = F.col(DOC)
    if spec.as_ is not None:
        response = Expr(value=F.parse_json(F.col(RESULT)))
        written = set_field(F.col(DOC), spec.as_, response).value
        result = F.when(F.col(RESULT).isNull(), F.col(DOC)).otherwise(written)
    done = answered.with_doc(Expr(value=result, error=F.col(ERROR)), operator=operator)
    return StreamFrame(done.finished(scope).df.drop(*columns, RESULT, ERROR))


def _request_columns(
    spec: Any, scope: Any, ctx: CompileContext, stage_path: str, *, healthy: Column
) -> dict[str, Column]:
    columns: dict[str, Column] = {HEALTHY: healthy}
    if spec.path is not None and not (isinstance(spec.path, str) and not spec.path.startswith("$")):
        value = compile_expression(spec.path, scope, join_path(stage_path, "path"), ctx.problems)
        columns[PATH] = F.to_json(value.value)
    for prefix, field, mapping in (
        (PARAM_PREFIX, "parameters", spec.parameters),
        (HEADER_PREFIX, "headers", spec.headers),
    ):
        for index, (name, raw) in enumerate((mapping or {}).items()):
            where = join_path(stage_path, field, name)
            value = compile_expression(raw, scope, where, ctx.problems)
            columns[f"{prefix}{index}"] = F.to_json(value.value)
    return columns


def _with_body(spec: Any, frame: StreamFrame, ctx: CompileContext, stage_path: str) -> StreamFrame:
    """The frame with the request body in `BODY` (the document itself left unchanged)."""
    if spec.payload is None:
        if spec.method in ("POST", "PUT", "PATCH"):
            return StreamFrame(frame.df.withColumn(BODY, F.to_json(F.col(DOC))))
        return frame
    shaped = StreamFrame(frame.df.withColumn(ORIGINAL, F.col(DOC)))
    for index, stage in enumerate(spec.payload):
        compiled = entry_of(stage).module.compile(
            stage, shaped, ctx, join_path(stage_path, "payload", index)
        )
        shaped = compiled
    df = shaped.df.withColumn(BODY, F.to_json(F.col(DOC)))
    return StreamFrame(df.withColumn(DOC, F.col(ORIGINAL)).drop(ORIGINAL))
