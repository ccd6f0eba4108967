"""The envelope: the one row shape that reaches the sink, for results, DLQ records and stats.

Stateless pipelines turn their frame into envelopes at the end; the window operator emits
envelopes directly (closed-window results, late documents, per-bucket stats), because one
Structured Streaming query can only have one output. The sink splits them by `kind`.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline_stages._engine.frame import (
    DLQ_OPERATOR,
    DLQ_REASON,
    DOC,
    EVENT_MS,
    META,
    PART,
    SEQ,
    StreamFrame,
)

KIND_OUTPUT = "out"
KIND_DLQ = "dlq"
KIND_STATS = "stats"

#: `doc`, `meta` and `missed` are JSON text; `sub` orders several envelopes of one position.
ENVELOPE_SCHEMA = (
    "kind STRING, part INT, seq BIGINT, sub INT, event_ms BIGINT, doc STRING, meta STRING, "
    "reason STRING, operator STRING, missed STRING, window_start BIGINT, window_key STRING"
)


def envelope_from_frame(frame: StreamFrame) -> DataFrame:
    """Envelopes for a frame that has reached the sink: outputs and DLQ records."""
    return frame.df.select(
        F.when(F.col(DLQ_REASON).isNull(), F.lit(KIND_OUTPUT)).otherwise(F.lit(KIND_DLQ)).alias(
            "kind"
        ),
        F.col(PART),
        F.col(SEQ),
        F.lit(0).alias("sub"),
        F.col(EVENT_MS),
        F.to_json(F.col(DOC)).alias("doc"),
        F.to_json(F.col(META)).alias("meta"),
        F.col(DLQ_REASON).alias("reason"),
        F.col(DLQ_OPERATOR).alias("operator"),
        F.lit(None).cast("string").alias("missed"),
        F.lit(None).cast("bigint").alias("window_start"),
        F.lit(None).cast("string").alias("window_key"),
    )
