"""Stats bodies: a processor's `stats` (Atlas §7.5 and Sluice's additions), its operators'
stats, a Kafka source's lag, and its last error."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PartitionLag(BaseModel):
    """One topic partition of a Kafka source."""

    topic: str
    partition: int
    latestOffset: int = Field(description="The broker's high watermark when the batch was planned.")
    processedOffset: int | None = Field(
        description="The next offset to read: every record before it went through a micro-batch "
        "(null: none of this partition yet)."
    )
    lag: int | None = Field(description="latestOffset − processedOffset (null: unknown).")


class SourceLag(BaseModel):
    """A Kafka source's backlog: records on the broker not yet through a micro-batch."""

    partitions: list[PartitionLag]
    totalLag: int | None = Field(description="The sum over partitions (null if one is unknown).")


class ProcessorErrorOut(BaseModel):
    """A processor's last failure (set while it retries, and once it has failed)."""

    code: str
    message: str
    time: datetime | None = Field(default=None, description="When the failure happened.")
    retries: int | None = Field(
        default=None, description="Restarts of the query scheduled so far (STARTED) or made."
    )


def _omit_none(value: object) -> bool:
    return value is None


class OperatorStats(BaseModel):
    """Per-operator stats (verbose); fields Sluice cannot measure are omitted."""

    model_config = ConfigDict(extra="allow")

    name: str
    dlqMessageCount: int = 0
    dlqMessageSize: int | float = 0
    outputMessageCount: int | None = Field(
        default=None,
        exclude_if=_omit_none,
        description="Documents the operator passed on, where known (source, the window's "
        "first operator, the last operator); omitted where unknown.",
    )


class ProcessorStats(BaseModel):
    """Atlas's `stats` (§7.5). Sizes are in bytes divided by `scaleFactor`."""

    model_config = ConfigDict(extra="allow")

    name: str
    processorId: str
    status: str = Field(
        description="created, running, recovering, starting, stopped or error. `recovering`: "
        "the query is being resumed or restarted (see `statusDetail`)."
    )
    statusDetail: str | None = Field(
        default=None,
        exclude_if=_omit_none,
        description='What a recovering processor is doing, e.g. "starting Spark", '
        '"replaying from checkpoint".',
    )
    retries: int = Field(default=0, description="Restarts of the query since it was started.")
    lastError: ProcessorErrorOut | None = Field(
        default=None, description="The last failure (code, message, time), even if recovered."
    )
    scaleFactor: int = 1
    # null = no data (e.g. an ephemeral processor has no query progress to count its input).
    inputMessageCount: int | None = 0
    inputMessageSize: int | float | None = 0
    outputMessageCount: int = 0
    outputMessageSize: int | float | None = 0
    dlqMessageCount: int = 0
    dlqMessageSize: int | float | None = 0
    stateSize: int | float | None = 0
    watermark: dict[str, str] | None = Field(
        default=None, description='Relaxed Extended JSON date: {"$date": "..."}'
    )
    eventTimeLagSeconds: float | None = Field(
        default=None, description="Now − the watermark, in seconds (null: no watermark yet)."
    )
    openWindows: int | None = Field(
        default=None, description="Windows open now (null: no window operator stats yet)."
    )
    oldestOpenWindowStart: str | None = Field(
        default=None, description="Start of the oldest open window (ISO 8601, UTC)."
    )
    sourceLag: SourceLag | None = Field(
        default=None,
        description="A Kafka source's backlog per partition at the last micro-batch (null: "
        "another source, or no progress yet).",
    )
    dlqByReason: dict[str, int] = Field(
        default_factory=dict, description="DLQ records by `errInfo.reason`."
    )
    dlqByOperator: dict[str, int] = Field(
        default_factory=dict, description="DLQ records by `operatorName`."
    )
    lastStateChange: datetime
    operatorStats: list[OperatorStats] | None = Field(
        default=None, exclude_if=_omit_none, description="Verbose only."
    )
    lastBatch: dict[str, Any] | None = Field(
        default=None, exclude_if=_omit_none, description="Verbose only: Spark's last micro-batch."
    )
