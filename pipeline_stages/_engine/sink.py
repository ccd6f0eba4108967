"""The `foreachBatch` sink: split envelopes into results, DLQ records and stats, then write.

Writers receive whole micro-batches with their `batch_id`, so a writer can make a replayed
batch idempotent (Spark replays the last batch after a crash with the same id and data).
DLQ record ids are deterministic (processor, source position, operator), so a replay
overwrites rather than duplicates.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pyspark.sql import DataFrame

from pipeline_stages._stream.envelope import KIND_DLQ
from pipeline_stages._stream.frame import KIND_OUTPUT, KIND_STATS


@dataclass(frozen=True)
class Output:
    """One emitted document: its JSON text and a deterministic id for idempotent sinks.

    `target` holds the sink target names computed per document (`sinks.targets`), if any.
    """

    doc_json: str
    key: str
    target: dict[str, Any] | None = None


@dataclass
class BatchResult:
    """What one micro-batch produced, in emission order."""

    batch_id: int
    outputs: list[Output] = field(default_factory=list)
    dlq: list[dict[str, Any]] = field(default_factory=list)
    stats: list[dict[str, Any]] = field(default_factory=list)
    #: Emission order across outputs and DLQ records: ("out" | "dlq", index).
    order: list[tuple[str, int]] = field(default_factory=list)


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


def dlq_record(row: Any, *, processor: str, now: datetime) -> dict[str, Any]:
    """Atlas's DLQ document (§6.2) for one DLQ envelope row."""
    meta = json.loads(row["meta"]) if row["meta"] else {}
    record: dict[str, Any] = {
        "_id": {"$oid": object_id(processor, row["part"], row["seq"], row["sub"], row["operator"])},
        "_stream_meta": meta,
        "errInfo": {"reason": row["reason"]},
        "operatorName": row["operator"],
    }
    if row["doc"] is not None:
        record["doc"] = json.loads(row["doc"])
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


class ForeachBatchSink:
    """The callable handed to `writeStream.foreachBatch`.

    With the batch window engine the sink only reads each batch (and logs it) before it
    returns; the engine folds it in the background while Spark reads the next one
    (`window_batch_pipeline`). Whoever waits for a batch's outputs calls `flush` once Spark
    reports the batch done, and whoever stops the query calls `close` after it."""

    def __init__(
        self,
        writer: BatchWriter,
        *,
        processor: str,
        window: Any | None = None,
        pipelined: bool = True,
    ) -> None:
        self.writer = writer
        self.processor = processor
        #: The batch window engine (`window_batch.BatchWindow`): the query's rows are its
        #: input, and it makes the envelopes.
        self.window = window
        self._folds: Any | None = None
        if window is not None and pipelined:
            from pipeline_stages._windowing.batch.pipelining import FoldPipeline

            self._folds = FoldPipeline(window, self.write_envelopes)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Collect the batch, in emission order, and hand it to the writer."""
        if self._folds is not None:
            self._folds.submit(df, batch_id)
            return
        found = self.window.envelopes(df, batch_id) if self.window is not None else df.collect()
        self.write_envelopes(batch_id, found)

    def flush(self) -> None:
        """Return once every batch Spark finished is written (raises a failed fold's error)."""
        if self._folds is not None:
            self._folds.flush()

    def close(self) -> BaseException | None:
        """After the query stopped: wait for the last batch's write; returns the error of a
        fold that failed (its batch stays logged for the next start)."""
        return self._folds.close() if self._folds is not None else None

    @property
    def failure(self) -> BaseException | None:
        """A background fold's error (the query fails with it at its next batch)."""
        return self._folds.failure if self._folds is not None else None

    def write_envelopes(self, batch_id: int, found: list[Any]) -> None:
        """Hand one batch's envelopes to the writer, in emission order."""
        # Sorting in Python, not with orderBy: a global sort samples its input first, which
        # would read the source twice.
        rows = sorted(found, key=lambda r: (r["seq"], r["part"], r["sub"]))
        now = datetime.now(tz=UTC)
        batch = BatchResult(batch_id=batch_id)
        for row in rows:
            if row["kind"] == KIND_OUTPUT:
                batch.order.append((KIND_OUTPUT, len(batch.outputs)))
                batch.outputs.append(
                    Output(row["doc"], output_key(row, self.processor), sink_target(row["meta"]))
                )
            elif row["kind"] == KIND_DLQ:
                batch.order.append((KIND_DLQ, len(batch.dlq)))
                batch.dlq.append(dlq_record(row, processor=self.processor, now=now))
            elif row["kind"] == KIND_STATS:
                batch.stats.append(json.loads(row["doc"]))
        self.writer.write(batch)
