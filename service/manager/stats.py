"""Processor stats (Atlas §7.5), fed by the batch writer and the query listener.

Counts are cumulative over the processor's life and persisted with it (`ProcessorRecord.stats`),
so they survive stop/start, service restarts and `resumeFromCheckpoint: false` (Atlas keeps
"only the summary stats" then). Spark replays the last micro-batch after a crash; each batch
id is counted once per checkpoint generation (the `_cursor` entry), so a replay is not
counted twice.

Where the numbers come from:

* `inputMessageCount` / `inputMessageSize`: the source's observed metrics (records and bytes
  read, DLQ'd ones included), else `numInputRows`;
* `outputMessageCount` / `outputMessageSize`, `dlqMessageCount` / `dlqMessageSize`: the
  documents and DLQ records the writer received (JSON text bytes);
* `stateSize`, `watermark`: the window operator's stats rows, else Spark's state operators and
  event-time watermark.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pipeline_stages.source import INPUT_METRICS

COUNTERS = (
    "inputMessageCount",
    "inputMessageSize",
    "outputMessageCount",
    "outputMessageSize",
    "dlqMessageCount",
    "dlqMessageSize",
)


class LiveStats:
    """Thread-safe stats of one processor (see the module docstring)."""

    def __init__(self, stored: Mapping[str, Any] | None = None, *, generation: int = 1) -> None:
        stored = dict(stored or {})
        self._lock = threading.Lock()
        self.totals = {name: int(stored.get(name, 0) or 0) for name in COUNTERS}
        self.state_size = int(stored.get("stateSize", 0) or 0)
        watermark = stored.get("watermark")
        # The store decodes a persisted `{"$date": ...}` into a datetime; stats show (and the
        # API schema requires) the `{"$date": ...}` form.
        if isinstance(watermark, datetime):
            watermark = {
                "$date": watermark.astimezone(UTC)
                .isoformat(timespec="milliseconds")
                .replace("+00:00", "Z")
            }
        self.watermark: dict[str, str] | None = watermark
        self.operator_dlq: dict[str, list[int]] = {
            name: [int(v[0]), int(v[1])] for name, v in dict(stored.get("_operatorDlq", {})).items()
        }
        cursor = dict(stored.get("_cursor", {}))
        same = cursor.get("generation") == generation
        self.generation = generation
        self.input_batch = int(cursor.get("inputBatch", -1)) if same else -1
        self.output_batch = int(cursor.get("outputBatch", -1)) if same else -1
        self.last_batch: dict[str, Any] | None = stored.get("_lastBatch")
        self._state_by_bucket: dict[int, int] = {}
        self._watermark_by_bucket: dict[int, str] = {}
        self.dirty = False

    # ------------------------------------------------------------------ recording

    def new_generation(self, generation: int) -> None:
        """A fresh checkpoint: batch ids start again at 0."""
        with self._lock:
            self.generation = generation
            self.input_batch = self.output_batch = -1
            self._state_by_bucket.clear()
            self._watermark_by_bucket.clear()
            self.dirty = True

    def record_batch(
        self,
        batch_id: int,
        *,
        output_sizes: Iterable[int],
        dlq_records: Iterable[tuple[str, int]],
        window_stats: Iterable[Mapping[str, Any]],
    ) -> bool:
        """Count one written micro-batch; False (nothing counted) for a replayed batch id."""
        with self._lock:
            if batch_id <= self.output_batch:
                return False
            self.output_batch = batch_id
            sizes = list(output_sizes)
            self.totals["outputMessageCount"] += len(sizes)
            self.totals["outputMessageSize"] += sum(sizes)
            for operator, size in dlq_records:
                self.totals["dlqMessageCount"] += 1
                self.totals["dlqMessageSize"] += size
                entry = self.operator_dlq.setdefault(operator, [0, 0])
                entry[0] += 1
                entry[1] += size
            self._window_stats(window_stats)
            self.dirty = True
            return True

    def _window_stats(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            bucket = int(row.get("bucket", 0) or 0)
            if "stateSize" in row:
                self._state_by_bucket[bucket] = int(row["stateSize"] or 0)
            if isinstance(row.get("watermark"), dict):
                self._watermark_by_bucket[bucket] = str(row["watermark"].get("$date"))
        if self._state_by_bucket:
            self.state_size = sum(self._state_by_bucket.values())
        if self._watermark_by_bucket:
            self.watermark = {"$date": max(self._watermark_by_bucket.values())}

    def record_progress(self, progress: Mapping[str, Any]) -> bool:
        """Count one `StreamingQueryProgress`; False for a batch id already counted."""
        batch_id = int(progress.get("batchId", -1))
        with self._lock:
            if batch_id <= self.input_batch:
                return False
            self.input_batch = batch_id
            observed = (progress.get("observedMetrics") or {}).get(INPUT_METRICS) or {}
            rows = observed.get("count", progress.get("numInputRows", 0))
            self.totals["inputMessageCount"] += int(rows or 0)
            self.totals["inputMessageSize"] += int(observed.get("bytes", 0) or 0)
            if not self._state_by_bucket:
                self.state_size = sum(
                    int(op.get("memoryUsedBytes", 0) or 0)
                    for op in progress.get("stateOperators") or []
                )
            spark_watermark = (progress.get("eventTime") or {}).get("watermark")
            if (
                not self._watermark_by_bucket
                and spark_watermark
                and not spark_watermark.startswith("1970-01-01T00:00:00")
            ):
                self.watermark = {"$date": spark_watermark}
            self.last_batch = {
                "batchId": batch_id,
                "numInputRows": int(progress.get("numInputRows", 0) or 0),
                "durationMs": int((progress.get("durationMs") or {}).get("triggerExecution", 0)),
                "processedRowsPerSecond": float(progress.get("processedRowsPerSecond", 0) or 0),
                "timestamp": progress.get("timestamp"),
            }
            self.dirty = True
            return True

    # ------------------------------------------------------------------ reading

    def to_record(self) -> dict[str, Any]:
        """The persisted form (public fields plus `_cursor`, `_operatorDlq`, `_lastBatch`)."""
        with self._lock:
            self.dirty = False
            record: dict[str, Any] = dict(self.totals)
            record["stateSize"] = self.state_size
            record["watermark"] = self.watermark
            record["_operatorDlq"] = {k: list(v) for k, v in self.operator_dlq.items()}
            record["_cursor"] = {
                "generation": self.generation,
                "inputBatch": self.input_batch,
                "outputBatch": self.output_batch,
            }
            record["_lastBatch"] = self.last_batch
            return record

    def snapshot(self) -> dict[str, Any]:
        """Counters, state size, watermark and the last batch (does not clear `dirty`)."""
        with self._lock:
            out: dict[str, Any] = dict(self.totals)
            out["stateSize"] = self.state_size
            out["watermark"] = self.watermark
            out["_lastBatch"] = self.last_batch
            return out

    def public(
        self,
        *,
        name: str,
        processor_id: str,
        status: str,
        last_state_change: datetime,
        scale: int = 1,
        operators: Iterable[str] = (),
        verbose: bool = False,
    ) -> dict[str, Any]:
        """Atlas's `stats` object; `verbose` adds `operatorStats` and Spark's last batch."""
        with self._lock:
            out: dict[str, Any] = {
                "name": name,
                "processorId": processor_id,
                "status": status,
                "scaleFactor": scale,
            }
            for counter in COUNTERS:
                value = self.totals[counter]
                out[counter] = value / scale if counter.endswith("Size") and scale != 1 else value
            out["stateSize"] = self.state_size / scale if scale != 1 else self.state_size
            out["watermark"] = self.watermark
            out["lastStateChange"] = last_state_change.astimezone(UTC).isoformat()
            if verbose:
                out["operatorStats"] = self._operators(operators, scale)
                out["lastBatch"] = self.last_batch
            return out

    def _operators(self, operators: Iterable[str], scale: int) -> list[dict[str, Any]]:
        names = list(dict.fromkeys([*operators, *self.operator_dlq]))
        stats = []
        for name in names:
            count, size = self.operator_dlq.get(name, [0, 0])
            entry: dict[str, Any] = {
                "name": name,
                "dlqMessageCount": count,
                "dlqMessageSize": size / scale if scale != 1 else size,
            }
            if name == "SourceOperator":
                entry["inputMessageCount"] = self.totals["inputMessageCount"]
                entry["inputMessageSize"] = self.totals["inputMessageSize"]
            stats.append(entry)
        return stats


def utc_now() -> datetime:
    """The current time (UTC, aware)."""
    return datetime.now(tz=UTC)
