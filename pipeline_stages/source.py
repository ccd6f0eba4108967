"""`$source`: where documents come from (first stage, exactly one).

The connection type is only known at compile time, so the spec holds the union of the
documented forms; it checks what holds whatever the type, and the compiler checks the
combinations that depend on it (using `model_fields_set` to see what the user wrote).

* Common: `connectionName` (required unless `documents` is given), `timeField`
  (`{$toDate: <expr>}`, `{$dateFromString: {...}}` or a `"$field"` path), `tsFieldName`
  (default `_ts`, no dots), `streamMetaFieldName` (default `_stream_meta`, `""` disables).
* Kafka: `topic` (string or array), `partitionIdleTimeout` (duration, default disabled),
  `config {auto_offset_reset, group_id, enable_auto_commit, keyFormat, keyFormatError}`.
* Change stream: `db`, `coll` (string or array; needs `db`), `readPreference`,
  `readPreferenceTags`, `config {fullDocument, fullDocumentBeforeChange, fullDocumentOnly,
  startAfter | startAtOperationTime, pipeline, maxAwaitTimeMS}`.
* Document array: `documents` (an array of objects or an expression), not combined with
  `connectionName`, `topic`, `db` or `coll`.
* Sluice additions: `config.batchSize` (documents per micro-batch for the `documents`
  source, default 1 as in Atlas, which makes watermarks advance one document at a time),
  `config.maxOffsetsPerTrigger` (Kafka, HTTP ingest and File: records per micro-batch at
  most, default 10,000: back pressure, so a backlog is read in bounded batches) and
  `path` (a file or directory under a File connection's root).

Rejected with `unsupported_option`: `initialSync` (initial collection scans are not
implemented), `schemaRegistry` (Avro; Sluice reads JSON/EJSON only), the Kinesis fields
`stream`, `region`, `shardIdleTimeout`, and the old name `tsFieldOverride`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictBool, field_validator

from pipeline_stages._base import (
    Duration,
    OneOrMoreStrings,
    ProblemCode,
    WholeNumber,
    custom_error,
    describe,
    field_name_problem,
    join_path,
)
from pipeline_stages._connectors.sources.spool import Spool
from pipeline_stages._problems import CheckedSpec, ErrorList, given
from pipeline_stages._stream.batch import INPUT_METRICS

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext, SourcePlan


KEY = "$source"
OPERATOR_NAME = "SourceOperator"


class SourceConfig(CheckedSpec):
    """`$source.config`: Kafka, change-stream and Sluice options together (defaults applied)."""

    auto_offset_reset: Literal["end", "latest", "largest", "earliest", "beginning", "smallest"] = (
        "latest"
    )
    group_id: str | None = None
    enable_auto_commit: StrictBool | None = None  # default depends on the processor kind
    key_format: Literal["binData", "string", "json", "int", "long", "double"] = Field(
        default="binData", alias="keyFormat"
    )
    key_format_error: Literal["dlq", "passThrough"] = Field(default="dlq", alias="keyFormatError")
    full_document: Literal["default", "updateLookup", "required", "whenAvailable"] = Field(
        default="default", alias="fullDocument"
    )
    full_document_before_change: Literal["off", "whenAvailable", "required"] = Field(
        default="off", alias="fullDocumentBeforeChange"
    )
    full_document_only: StrictBool = Field(default=False, alias="fullDocumentOnly")
    start_after: Any = Field(default=None, alias="startAfter")
    start_at_operation_time: Any = Field(default=None, alias="startAtOperationTime")
    pipeline: list[dict[str, Any]] | None = None
    max_await_time_ms: WholeNumber | None = Field(default=None, alias="maxAwaitTimeMS", ge=1)
    batch_size: WholeNumber = Field(default=1, alias="batchSize", ge=1)
    #: Sluice addition (Kafka): records per micro-batch at most (default 10,000).
    max_offsets_per_trigger: WholeNumber | None = Field(
        default=None, alias="maxOffsetsPerTrigger", ge=1
    )

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        if given(raw, "startAfter") and given(raw, "startAtOperationTime"):
            errors.add(
                ("startAtOperationTime",),
                ProblemCode.INVALID_COMBINATION,
                "startAfter and startAtOperationTime cannot both be set",
                raw["startAtOperationTime"],
            )


def _quote_problem(value: str) -> str | None:
    # Spark's VARIANT paths cannot escape quotes: a name with both kinds cannot be addressed.
    if "'" in value and '"' in value:
        return "a field name may not contain both single and double quotes"
    return None


def _time_field_problem(value: Any) -> str | None:
    if isinstance(value, str):
        if value.startswith("$") and not value.startswith("$$") and len(value) > 1:
            return None
    elif isinstance(value, dict) and len(value) == 1:
        operator, argument = next(iter(value.items()))
        if operator == "$toDate":
            return None
        if operator == "$dateFromString":
            return (
                None
                if isinstance(argument, dict) and "dateString" in argument
                else (
                    f"$dateFromString takes {{dateString: <expr>, ...}}, got {describe(argument)}"
                )
            )
    return f'timeField must be {{$toDate: <expr>}}, {{$dateFromString: {{...}}}} or a "$field" path, got {describe(value)}'


class SourceSpec(CheckedSpec):
    """The body of `$source`."""

    UNSUPPORTED_OPTIONS = {
        "initialSync": "initial collection scans are not implemented in Sluice",
        "schemaRegistry": "Avro and schema registries are not available; messages must be JSON or EJSON",
        "stream": "Kinesis sources are not available in Sluice",
        "region": "Kinesis sources are not available in Sluice",
        "shardIdleTimeout": "Kinesis sources are not available in Sluice",
        "tsFieldOverride": "it is the old name of tsFieldName; use tsFieldName",
    }

    connection_name: str | None = Field(default=None, alias="connectionName")
    documents: Any = None
    time_field: Any = Field(default=None, alias="timeField")
    ts_field_name: str = Field(default="_ts", alias="tsFieldName")
    stream_meta_field_name: str = Field(default="_stream_meta", alias="streamMetaFieldName")
    topic: OneOrMoreStrings | None = None
    partition_idle_timeout: Duration | None = Field(default=None, alias="partitionIdleTimeout")
    db: str | None = None
    coll: OneOrMoreStrings | None = None
    read_preference: (
        Literal["primary", "primaryPreferred", "secondary", "secondaryPreferred", "nearest"] | None
    ) = Field(default=None, alias="readPreference")
    read_preference_tags: list[dict[str, Any]] | None = Field(
        default=None, alias="readPreferenceTags"
    )
    path: str | None = None
    config: SourceConfig = Field(default_factory=SourceConfig)

    @field_validator("documents")
    @classmethod
    def _documents(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return value  # an expression that evaluates to an array
        if not isinstance(value, list):
            raise custom_error(
                "list_type",
                f"documents must be an array of documents or an expression, got {describe(value)}",
            )
        errors = ErrorList()
        for index, doc in enumerate(value):
            if not isinstance(doc, dict):
                errors.add(
                    (index,),
                    "dict_type",
                    f"documents entries must be objects, got {describe(doc)}",
                    doc,
                )
        errors.raise_if_any(cls.__name__)
        return value

    @field_validator("time_field")
    @classmethod
    def _time_field(cls, value: Any) -> Any:
        if problem := _time_field_problem(value):
            raise custom_error(ProblemCode.INVALID_VALUE, problem)
        return value

    @field_validator("ts_field_name")
    @classmethod
    def _ts_field_name(cls, value: str) -> str:
        if problem := field_name_problem(value, dotted=False) or _quote_problem(value):
            raise custom_error(ProblemCode.INVALID_VALUE, f"tsFieldName: {problem}")
        return value

    @field_validator("stream_meta_field_name")
    @classmethod
    def _stream_meta_field_name(cls, value: str) -> str:
        if value and (problem := field_name_problem(value, dotted=False) or _quote_problem(value)):
            raise custom_error(ProblemCode.INVALID_VALUE, f"streamMetaFieldName: {problem}")
        return value

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        if "documents" in raw:
            for alias in ("connectionName", "topic", "db", "coll"):
                if given(raw, alias):
                    errors.add(
                        (alias,),
                        ProblemCode.INVALID_COMBINATION,
                        f"documents cannot be combined with {alias}",
                        raw[alias],
                    )
        elif not given(raw, "connectionName"):
            errors.add(
                ("connectionName",),
                "missing",
                "connectionName is required unless documents is given",
                None,
            )
        if given(raw, "topic") and (given(raw, "db") or given(raw, "coll")):
            errors.add(
                ("topic",),
                ProblemCode.INVALID_COMBINATION,
                "topic (Kafka) cannot be combined with db/coll (change stream)",
                raw["topic"],
            )
        if given(raw, "coll") and not given(raw, "db"):
            errors.add(
                ("db",),
                "missing",
                "coll requires db (a change stream on a collection of a database)",
                None,
            )

    @property
    def stream_meta_projected(self) -> bool:
        """Whether stream metadata is projected into documents (`streamMetaFieldName != ""`)."""
        return bool(self.stream_meta_field_name)


def compile(spec: SourceSpec, ctx: CompileContext, path: str) -> SourcePlan:  # noqa: A001
    """Read the stream for this source, then parse, time-stamp and project metadata.

    Sources available: `documents`, the `Sample` connection (`sample_stream_solar`),
    `HttpIngest` connections (the spool behind `POST /ingest/{connection}`) and `Kafka`
    connections (`_engine.sources.kafka_plan`). The
    other connection types are rejected here with `unsupported_option` until their
    connectors exist, never silently ignored.
    """
    from pipeline_stages._connectors.sources.ingest import ingest_source
    from pipeline_stages._stream.context import SourcePlan

    body = join_path(path, KEY)
    connection = ctx.connection(spec.connection_name) if spec.connection_name else None
    if connection is not None and connection.type == "Kafka":
        from pipeline_stages._connectors.sources.kafka_plan import compile_kafka_source

        return compile_kafka_source(
            spec, ctx, connection, body, observe=_observe_input, operator=OPERATOR_NAME
        )
    raw, total = _read_stream(spec, ctx, body)
    raw = _observe_input(raw)
    frame = ingest_source(raw, spec, operator=OPERATOR_NAME, problems=ctx.problems, body=body)
    return SourcePlan(frame=frame, finite_total=total, source_type=_source_type(connection))


def _source_type(connection: Any) -> str:
    """`_stream_meta.source.type` of window results (the sources stamp their own records)."""
    if connection is None:
        return "generated"
    return {"File": "file", "Cluster": "atlas", "HttpIngest": "httpIngest"}.get(
        connection.type, "generated"
    )


def _read_stream(spec: SourceSpec, ctx: Any, body: str) -> tuple[Any, int | None]:
    from pipeline_stages._connectors.sources import documents, sample_solar

    reader = ctx.read_stream()
    if spec.connection_name is None:
        if not isinstance(spec.documents, list):
            ctx.problems.error(
                join_path(body, "documents"),
                ProblemCode.UNSUPPORTED_OPTION,
                "documents given as an expression are not supported yet; give an array",
            )
            return _empty_stream(ctx), 0
        texts = [json.dumps(doc, allow_nan=False) for doc in spec.documents]
        batch = ctx.batch_size or _documents_batch(spec.config, ctx, len(texts))
        base_ms = ctx.base_time_ms if ctx.base_time_ms is not None else int(time.time() * 1000)
        if _file_backed(ctx, texts, batch):
            return documents.file_stream(ctx.spark, texts, base_ms, ctx.documents_dir), len(texts)
        stream = (
            reader.format(documents.FORMAT)
            .option("documents", json.dumps(texts))
            .option("batchSize", str(batch))
            .option("baseTimeMs", str(base_ms))
            .load()
        )
        return stream, len(texts)
    connection = ctx.connection(spec.connection_name)
    if connection is None:
        ctx.problems.error(
            join_path(body, "connectionName"),
            ProblemCode.UNKNOWN_CONNECTION,
            f"no connection named {spec.connection_name!r} is registered",
        )
        return _empty_stream(ctx), 0
    if connection.type == "Sample":
        rate = str(connection.config.get("rate", 10))
        return reader.format(sample_solar.FORMAT).option("rate", rate).load(), None
    if connection.type == "HttpIngest":
        return _read_http_ingest(spec, ctx, connection), None
    if connection.type == "File":
        from pipeline_stages._connectors.sources.files import read_file_stream

        return read_file_stream(spec, ctx, connection, body) or _empty_stream(ctx), None
    if connection.type == "Cluster":
        from pipeline_stages._connectors.sources.change_stream import read_change_stream

        return read_change_stream(spec, ctx, connection, body) or _empty_stream(ctx), None
    ctx.problems.error(
        join_path(body, "connectionName"),
        ProblemCode.UNSUPPORTED_OPTION,
        f"$source on a {connection.type} connection is not available yet",
    )
    return _empty_stream(ctx), 0


def _observe_input(raw: Any) -> Any:
    """Count every raw record and its bytes under `INPUT_METRICS` (Atlas's
    `inputMessageCount` / `inputMessageSize`: the sink reads them inside each batch)."""
    from pyspark.sql import functions as F

    return raw.observe(
        INPUT_METRICS,
        F.count(F.lit(1)).alias("count"),
        F.coalesce(F.sum(F.octet_length("raw")), F.lit(0)).alias("bytes"),
    )


def _read_http_ingest(spec: SourceSpec, ctx: Any, connection: Any) -> Any:
    """The connection's spool from a start position (`latest`) or its beginning (`earliest`).

    Spark does not checkpoint a Python source's initial offset, so a query whose first batch
    never committed asks for it again on restart. The service therefore fixes the start once
    per checkpoint and passes it as `startSeq` in the connection's config; without it (an
    ephemeral run) the start is the spool's end now.
    """
    from pipeline_stages._connectors.sources import http_ingest
    from pipeline_stages._connectors.sources.raw_source import read_tasks

    earliest = spec.config.auto_offset_reset in ("earliest", "beginning", "smallest")
    start = connection.config.get("startSeq")
    if earliest:
        start = 0
    elif start is None:
        start = Spool(ctx.data_dir).latest_seq(connection.name)
    return (
        ctx.read_stream()
        .format(http_ingest.FORMAT)
        .option("dataDir", str(ctx.data_dir))
        .option("connection", connection.name)
        .option("startSeq", str(int(start)))
        .option(
            "maxRecordsPerBatch",
            str(spec.config.max_offsets_per_trigger or http_ingest.DEFAULT_MAX_PER_BATCH),
        )
        .option("parallelism", str(read_tasks(ctx)))
        .load()
    )


def _empty_stream(ctx: Any) -> Any:
    """A placeholder stream so compilation can go on collecting problems."""
    from pipeline_stages._connectors.sources import documents

    return ctx.spark.readStream.format(documents.FORMAT).option("documents", json.dumps([])).load()


def _file_backed(ctx: Any, texts: list[str], batch: int) -> bool:
    """Whether a `documents` array is read by Spark's own file source
    (`sources.documents.file_stream`): the run gave a directory for it, reads the whole
    array in one micro-batch without `$throttle` (which Sluice's readers apply), and its
    executors share the driver's disk (a local master)."""
    return (
        ctx.documents_dir is not None
        and bool(texts)
        and batch >= len(texts)
        and ctx.throttle is None
        and str(ctx.spark.sparkContext.master).startswith("local")
    )


def _documents_batch(config: SourceConfig, ctx: Any, documents: int) -> int:
    """The `documents` source's batch size: the pipeline's `config.batchSize` if it gives one,
    else the run's default (`CompileContext.documents_batch_default`; 0: all at once), else
    Atlas's one document per micro-batch. Results do not depend on it; the first result of a
    short array comes one micro-batch per document sooner with all at once."""
    if "batch_size" in config.model_fields_set or ctx.documents_batch_default is None:
        return config.batch_size
    return ctx.documents_batch_default or max(1, documents)
