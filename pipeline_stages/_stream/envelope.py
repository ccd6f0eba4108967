"""The envelope: the one row shape that reaches the sink, for results, DLQ records and stats.

The window operator emits envelopes directly (closed-window results, late documents,
per-bucket stats), because one Structured Streaming query has one output; stages after a
window turn them back into a frame. The sink splits envelopes by `kind`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline_stages._stream.frame import (
    DLQ_OPERATOR,
    DLQ_REASON,
    DOC,
    EVENT_MS,
    KIND,
    KIND_OUTPUT,
    KIND_TICK,
    META,
    MISSED,
    PART,
    SEQ,
    SUB,
    WINDOW_KEY,
    WINDOW_START,
    StreamFrame,
    filter_rows,
)

KIND_DLQ = "dlq"

#: `doc`, `meta` and `missed` are JSON text; `kind` is `out`, `dlq` or `stats`.
ENVELOPE_SCHEMA = (
    "kind STRING, part INT, seq BIGINT, sub BIGINT, event_ms BIGINT, doc STRING, meta STRING, "
    "reason STRING, operator STRING, missed STRING, window_start BIGINT, window_key STRING"
)


def envelope_from_frame(frame: StreamFrame) -> DataFrame:
    """Envelopes for a frame that has reached the sink."""
    kind = F.when(F.col(DLQ_REASON).isNotNull(), F.lit(KIND_DLQ)).otherwise(F.col(KIND))
    return filter_rows(frame.df, F.col(KIND) != KIND_TICK).select(
        kind.alias("kind"),
        F.col(PART),
        F.col(SEQ),
        F.col(SUB),
        F.col(EVENT_MS),
        F.to_json(F.col(DOC)).alias("doc"),
        F.to_json(F.col(META)).alias("meta"),
        F.col(DLQ_REASON).alias("reason"),
        F.col(DLQ_OPERATOR).alias("operator"),
        F.col(MISSED),
        F.col(WINDOW_START),
        F.col(WINDOW_KEY),
    )


#: The DLQ reason of a window result Spark cannot read back (`frame_from_envelope`).
UNREADABLE_RESULT = (
    "Failed to process input document in GroupOperator with error: the window result nests "
    "deeper than 1000 levels, more than Spark reads"
)


def frame_from_envelope(envelopes: DataFrame) -> StreamFrame:
    """A frame again, for stages that follow a window (results become documents).

    A result Spark cannot parse (one `$push` of documents near Spark's nesting limit nests
    past it) goes to the DLQ with its text as the document, instead of failing the query.
    """
    is_dlq = F.col("kind") == KIND_DLQ
    parsed = F.try_parse_json(F.col("doc"))
    unreadable = F.col("doc").isNotNull() & parsed.isNull()
    return StreamFrame(
        envelopes.select(
            F.col(PART),
            F.col(SEQ),
            F.col(SUB),
            F.col(EVENT_MS),
            F.when(unreadable, F.col("doc").cast("variant")).otherwise(parsed).alias(DOC),
            F.parse_json(F.coalesce(F.col("meta"), F.lit("{}"))).alias(META),
            F.when(unreadable & F.col("reason").isNull(), F.lit(UNREADABLE_RESULT))
            .otherwise(F.col("reason"))
            .alias(DLQ_REASON),
            F.when(unreadable & F.col("operator").isNull(), F.lit("GroupOperator"))
            .otherwise(F.col("operator"))
            .alias(DLQ_OPERATOR),
            F.when(is_dlq, F.lit(KIND_OUTPUT)).otherwise(F.col("kind")).alias(KIND),
            F.col(MISSED),
            F.col(WINDOW_START),
            F.col(WINDOW_KEY),
        )
    )
