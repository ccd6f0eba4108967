"""From raw source records to a stream frame: parse, time-stamp, project metadata (§3.1, §5).

Per document, in this order:
1. the source must not have flagged the record (its `error` column: bytes that are not UTF-8,
   an invalid Extended JSON wrapper, ...; see `sources.records`), and the text must parse as
   a JSON object, else the record goes to the DLQ;
2. the event time is `timeField` evaluated on the document (it must yield a date), else the
   source's own timestamp; a failing `timeField` sends the document to the DLQ;
3. the event time is projected into `tsFieldName` (default `_ts`) and the source metadata into
   `streamMetaFieldName` (default `_stream_meta`, merged into an existing object field; `""`
   disables it), as Atlas does. The frame keeps its unstamped form too (`StreamFrame.unstamped`),
   which a window right after the source may read instead (`spark.unstamped`).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCollector, join_path
from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.ops.paths import key_path
from pipeline_stages._mql.scope import Scope
from pipeline_stages._stream.frame import (
    DLQ_OPERATOR,
    DLQ_REASON,
    DOC,
    EVENT_MS,
    KIND,
    KIND_OUTPUT,
    META,
    MISSED,
    PART,
    SEQ,
    SUB,
    WINDOW_KEY,
    WINDOW_START,
    StreamFrame,
    Unstamped,
)

SOURCE_REASON_PREFIX = "Failed to process input document with error: "
INVALID_JSON = SOURCE_REASON_PREFIX + "input is not a valid JSON object"
#: The raw column holding a source's own reason to send a record to the DLQ (`RAW_SCHEMA`).
SOURCE_ERROR = "error"


def variant_path(field: str) -> str:
    """A VARIANT path selecting the top-level field `field`.

    Spark's variant paths have no escapes; `tsFieldName`/`streamMetaFieldName` cannot hold
    both quote characters (checked when the spec is parsed), so one quote style always fits.
    """
    return key_path([field]) or f'$["{field}"]'


def ingest(
    raw: DataFrame,
    *,
    time_field: Any | None,
    ts_field: str,
    meta_field: str,
    operator: str,
    problems: ProblemCollector,
    path: str,
) -> StreamFrame:
    """Turn a raw record stream (see `sources.RAW_SCHEMA`) into a stream frame."""
    staged = raw.withColumn("__parsed", F.try_parse_json(F.col("raw")))
    staged = staged.withColumn("__is_object", K.is_plain_object(F.col("__parsed")))
    parsed, is_object = F.col("__parsed"), F.col("__is_object")
    # The source's own verdict (`records.source_record`) comes first; frames built without
    # the column (benchmarks) have none.
    source_error = F.col(SOURCE_ERROR) if SOURCE_ERROR in raw.columns else F.lit(None)
    reason = (
        F.when(source_error.isNotNull(), F.concat(F.lit(SOURCE_REASON_PREFIX), source_error))
        .when(is_object, F.lit(None))
        .otherwise(F.lit(INVALID_JSON))
        .cast("string")
    )
    df = staged.select(
        F.col(PART),
        F.col(SEQ),
        F.col("source_ts_ms").alias(EVENT_MS),
        F.when(is_object, parsed).otherwise(F.col("raw").cast("variant")).alias(DOC),
        F.parse_json(F.concat(F.lit('{"source":'), F.col("meta"), F.lit("}"))).alias(META),
        reason.alias(DLQ_REASON),
        F.when(reason.isNull(), F.lit(None).cast("string"))
        .otherwise(F.lit(operator))
        .alias(DLQ_OPERATOR),
        F.lit(KIND_OUTPUT).alias(KIND),
        F.lit(0).cast("bigint").alias(SUB),
        F.lit(None).cast("string").alias(MISSED),
        F.lit(None).cast("bigint").alias(WINDOW_START),
        F.lit(None).cast("string").alias(WINDOW_KEY),
    )
    frame = StreamFrame(df)
    if time_field is not None:
        frame = _apply_time_field(frame, time_field, operator, problems, path)
    return _project_metadata(frame, ts_field=ts_field, meta_field=meta_field)


def ingest_source(
    raw: DataFrame, spec: Any, *, operator: str, problems: ProblemCollector, body: str
) -> StreamFrame:
    """`ingest` with a `$source` spec's `timeField`, `tsFieldName` and `streamMetaFieldName`;
    `body` is the JSON path of the `$source` body (problems name its `timeField`)."""
    return ingest(
        raw,
        time_field=spec.time_field,
        ts_field=spec.ts_field_name,
        meta_field=spec.stream_meta_field_name,
        operator=operator,
        problems=problems,
        path=join_path(body, "timeField"),
    )


def _apply_time_field(
    frame: StreamFrame, time_field: Any, operator: str, problems: ProblemCollector, path: str
) -> StreamFrame:
    scope: Scope = frame.scope()
    result = compile_expression(time_field, scope, path, problems)
    value = scope.bind(result.value)
    millis = scope.bind(V.as_epoch_ms(value))
    # Not bound: the type is only read for the error message of a value that is no date, and
    # `kind_of` costs ~2 us a row (a date's `schema_of_variant`), more than the rest of this.
    kind = K.kind_of(value)
    # A `{"$date": ...}` Spark cannot read is a date by its tag: say what is wrong with it.
    not_a_date = F.when(
        kind == "date",
        F.concat(
            F.lit("timeField must evaluate to a valid date, got "),
            F.to_json(value),
            F.lit(" (not a date in the years 1 to 9999)"),
        ),
    ).otherwise(F.concat(F.lit("timeField must evaluate to a date, got "), kind))
    error = scope.bind(F.coalesce(result.error_or_null(), F.when(millis.isNull(), not_a_date)))
    frame = frame.prepared(scope)
    # Atlas puts the bare expression error in the DLQ reason for timeField failures (§6.3).
    frame = frame.fail(error.isNotNull(), error, operator)
    df = frame.df.withColumn(EVENT_MS, F.when(frame.healthy, millis).otherwise(F.col(EVENT_MS)))
    return StreamFrame(df).finished(scope)


def _project_metadata(frame: StreamFrame, *, ts_field: str, meta_field: str) -> StreamFrame:
    df = frame.df
    existing = None
    if meta_field:
        df = df.withColumn("__existing_meta", existing_meta(F.col(DOC), meta_field))
        existing = F.col("__existing_meta")
    doc = stamped_doc(F.col(DOC), existing, ts_field=ts_field, meta_field=meta_field)
    updated = F.when(frame.healthy, doc).otherwise(F.col(DOC))
    stamped = df.withColumn(DOC, updated).drop("__existing_meta")
    return StreamFrame(stamped, unstamped=Unstamped(frame.df, ts_field, meta_field))


def existing_meta(doc: Column, meta_field: str) -> Column:
    """What `doc` holds in `meta_field` already (SQL NULL: nothing)."""
    return F.variant_get(doc, variant_path(meta_field), "variant")


def stamped_doc(doc: Column, existing: Column | None, *, ts_field: str, meta_field: str) -> Column:
    """`doc` stamped: the event time (`EVENT_MS`) in `ts_field`, the stream metadata (`META`)
    in `meta_field` (`""`: none) merged into an object already there (`existing`, see
    `existing_meta`: pass a materialised column, it is read several times)."""
    doc = F.variant_set(doc, variant_path(ts_field), V.from_epoch_ms(F.col(EVENT_MS)))
    if not meta_field or existing is None:
        return doc
    into_object = K.is_plain_object(existing)
    merged = F.when(into_object, _merge_objects(existing, F.col(META))).otherwise(F.col(META))
    return F.variant_set(doc, variant_path(meta_field), merged)


def _merge_objects(base: Column, extra: Column) -> Column:
    """Shallow merge of two VARIANT objects, `extra` winning (Atlas keeps user fields)."""
    base_map = F.try_variant_get(base, "$", "map<string, variant>")
    extra_map = F.try_variant_get(extra, "$", "map<string, variant>")
    kept = F.map_filter(base_map, lambda k, _v: ~F.array_contains(F.map_keys(extra_map), k))
    return F.to_variant_object(F.map_concat(kept, extra_map))
