"""A micro-batch as its writers see it: outputs, DLQ records and stats, with stable ids.

Writers receive whole micro-batches with their `batch_id`, so a writer can make a replayed
batch idempotent (Spark replays the last batch after a crash with the same id and data).
DLQ record ids are deterministic (processor, source position, operator), so a replay
overwrites rather than duplicates. A batch also carries the source's input counts when the
engine read them inside the batch (`input`), so a writer can persist every count of the batch
with the batch, before Spark commits it.

A DLQ record holds the failed document under `doc`, except when no store could hold it
there: a document nesting deeper than a BSON document may below `doc` (`BSON_MAX_DEPTH`,
less the record's own level), or one that does not parse, is kept as its Extended JSON text
under `docText` instead (`dlq_document`). The DLQ writer falls back to `docText` as well when
its store refuses a record for its content.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from pipeline_stages._stream.json_text import BSON_MAX_DEPTH, nests_deeper_than

#: The DLQ record field holding a document as Extended JSON text when `doc` cannot hold it.
DOC_TEXT: Final = "docText"


@dataclass(frozen=True)
class Output:
    """One emitted document: its JSON text and a deterministic id for idempotent sinks.

    `target` holds the sink target names computed per document (`sinks.targets`), if any.
    """

    doc_json: str
    key: str
    target: dict[str, Any] | None = None


#: The observed-metrics name under which each micro-batch counts the records and bytes read
#: from the source (`{"count": ..., "bytes": ...}`; `StreamingQueryProgress.observedMetrics`).
INPUT_METRICS = "sluice_source_input"


@dataclass(frozen=True)
class OutputTotals:
    """The counts of a batch whose outputs were written on the executors (`_engine.partitions`).

    Attributes:
        produced: Output documents the batch produced.
        written: Those the sink wrote (all of them without a sink).
        written_bytes: Their JSON text's bytes (UTF-8).
        first_message: The position, among the batch's messages (outputs and DLQ records in
            emission order), of the first message in `BatchResult.order`.
    """

    produced: int
    written: int
    written_bytes: int
    first_message: int


@dataclass(frozen=True)
class SinkRequests:
    """What a sink making one request per document (`$https` as the last stage) did with the
    documents of one write, for its operator's stats (`_enrichment.operator_stats`).

    Attributes:
        operator: The sink's operator name.
        received: Documents handed to the sink.
        acknowledged: Those whose request was answered with a 2xx status.
        latencies_ms: Each request sent, its time (retries included).
    """

    operator: str
    received: int
    acknowledged: int
    latencies_ms: tuple[float, ...] = ()


@dataclass
class BatchResult:
    """What one micro-batch produced, in emission order."""

    batch_id: int
    outputs: list[Output] = field(default_factory=list)
    dlq: list[dict[str, Any]] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)
    #: Emission order across outputs and DLQ records: ("out" | "dlq", index).
    order: list[tuple[str, int]] = field(default_factory=list)
    #: The source's records and bytes read by this batch (`INPUT_METRICS`, DLQ'd ones
    #: included), when the engine read them with the batch; None otherwise.
    input: dict[str, Any] | None = None
    #: Set when the sink already wrote the batch on the executors: `outputs` and `order` then
    #: hold only the batch's last messages (for `sample`), `dlq` every DLQ record.
    totals: OutputTotals | None = None
    #: Per-operator stats the sink counted itself where it wrote (`$https` as the last stage:
    #: `{operator: counts}`, `_enrichment.operator_stats`'s form); recorded with the batch.
    operators: dict[str, dict[str, Any]] = field(default_factory=dict)


class BatchWriter(Protocol):
    """Where a processor's micro-batches go (stdout, the stores, Kafka, files…)."""

    def write(self, batch: BatchResult) -> None:
        """Write one micro-batch; must tolerate the same `batch_id` being written again."""


def object_id(*parts: object) -> str:
    """A deterministic 24-hex ObjectId-like id from the given parts."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()
    return digest[:24]


def iso_millis(moment: datetime) -> str:
    """Relaxed Extended JSON date text with millisecond precision."""
    return (
        moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def dlq_document(doc_json: str) -> dict[str, Any]:
    """`{"doc": <document>}` for a DLQ record, or `{"docText": <its JSON text>}` when the
    document nests too deeply for a BSON record or does not parse (see the module doc)."""
    if nests_deeper_than(doc_json, BSON_MAX_DEPTH - 1):
        return {DOC_TEXT: doc_json}
    try:
        return {"doc": json.loads(doc_json)}
    except (ValueError, RecursionError):
        return {DOC_TEXT: doc_json}


#: Between a DLQ reason and the JSON of its `errInfo.details` in the envelope's reason column
#: (`$validate` says which rule failed, as MongoDB's validation errors do).
DETAILS_MARK: Final = "\u001f"


def err_info(reason: str) -> dict[str, Any]:
    """`errInfo` of a DLQ reason: `{reason}`, plus `details` when the reason carries them."""
    text, mark, details = reason.partition(DETAILS_MARK)
    if not mark:
        return {"reason": reason}
    try:
        return {"reason": text, "details": json.loads(details)}
    except ValueError:
        return {"reason": reason}


def dlq_record(row: Any, *, processor: str, now: datetime) -> dict[str, Any]:
    """Atlas's DLQ document (§6.2) for one DLQ envelope row."""
    meta = json.loads(row["meta"]) if row["meta"] else {}
    record: dict[str, Any] = {
        "_id": {"$oid": object_id(processor, row["part"], row["seq"], row["sub"], row["operator"])},
        "_stream_meta": meta,
        "errInfo": err_info(row["reason"]),
        "operatorName": row["operator"],
    }
    if row["doc"] is not None:
        record.update(dlq_document(row["doc"]))
    record["processorName"] = processor
    record["dlqTime"] = {"$date": iso_millis(now)}
    if row["missed"] is not None:
        record["missedWindowStartTimes"] = json.loads(row["missed"])
    return record


#: Where `sinks.targets` puts per-document sink target names in the row's metadata.
SINK_TARGET_META = "__sluice_sink"


def sink_target(meta_json: str | None) -> dict[str, Any] | None:
    """The sink target names computed for a document (None when the sink has literal ones)."""
    if not meta_json or SINK_TARGET_META not in meta_json:
        return None
    value = json.loads(meta_json).get(SINK_TARGET_META)
    return value if isinstance(value, dict) else None


def output_key(row: Any, processor: str) -> str:
    """A deterministic id for an emitted document (window results: window and group key)."""
    if row["window_start"] is not None:
        return object_id(processor, "w", row["window_start"], row["window_key"])
    return object_id(processor, "d", row["part"], row["seq"], row["sub"])
