"""Processor stats (Atlas §7.5), fed by the batch writer and the query listener.

Counts are cumulative over the processor's life and survive stop/start, service restarts,
`kill -9` and `resumeFromCheckpoint: false` (Atlas keeps "only the summary stats" then). They
are recorded with the micro-batch they count, before Spark commits it, in the stores' stats
ledger (`service.stores.stats_ledger`), keyed by checkpoint generation and batch id: a batch
Spark replays after a crash replaces its own counts instead of adding them again, and a
committed batch's counts are never lost with the process.

Where the numbers come from:

* `inputMessageCount` / `inputMessageSize`: the source's records and bytes read (DLQ'd ones
  included), which the Spark engine reads from the batch's observed metrics inside the batch
  and hands to the writer with it (`BatchResult.input`); an engine that does not
  (`Engine.batch_input_metrics` false) has them counted from Spark's progress reports instead;
* `outputMessageCount` / `outputMessageSize`: the documents the sink wrote (JSON text bytes),
  counted by the partitions that wrote them (`pipeline_stages._engine.partitions`);
  `dlqMessageCount` / `dlqMessageSize`: the DLQ records the writer received;
* `throttle.throttledTimeMs` / `throttle.throttleEvents` (`$throttle`) and the enrichment
  stages' per-operator counts, latencies and cache hits (`operatorStats`): read with the input
  counts (`pipeline_stages._engine.observed`), from the batch's end offset and observed metrics;
  `$https` as the sink counts its requests where it sends them and hands them over with the
  batch (`BatchResult.operators`);
* `stateSize`, `watermark`: the window operator's stats rows, else Spark's state operators and
  event-time watermark. These are gauges, not counts: they are persisted with the processor
  record every `stats_flush_seconds` and on stop; so are `openWindows` and
  `oldestOpenWindowStart`, from the window operator's stats rows only (None without them:
  unknown, not zero); so is `sourceLag`, a Kafka source's per-partition backlog from the
  last progress report (`service.manager.source_lag`; None for other sources);
* `dlqByReason` / `dlqByOperator`: the DLQ records' `errInfo.reason` / `operatorName`, counted
  in the ledger with the batch; `eventTimeLagSeconds`: now − watermark, when it is read;
* per-operator input and output (`operatorStats[]`, verbose): for the source (records read),
  the last operator (documents written; for `$https` as the sink, the requests answered 2xx),
  the enrichment stages (above), and the stages that count nothing themselves (`$match`,
  `$addFields`, ...: the healthy documents entering and leaving them, observed with the batch,
  `pipeline_stages._stream.stage_counts`), in the main pipeline and inside a window, before
  and after its `$group`/`$sort`. A window's operator adds, from its stats rows: the window's
  results, as the output of the last of its blocking stages (`resultsOperator`), and its state
  size and open window starts (`stateSize`, `minOpenWindowStartTime`,
  `maxOpenWindowStartTime`) on the stage holding its state (`stateOperator`), whose input is
  the documents reaching it. The blocking stages between them, and the stages after a
  batch-engine window, report no counts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._connectors.sources.rate_limit import throttle_figures
from pipeline_stages._enrichment.operator_stats import add_operators, operator_counts
from pipeline_stages.source import INPUT_METRICS
from pipeline_stages.throttle import OPERATOR_NAME as THROTTLE_OPERATOR
from service.manager.operator_entries import operator_entries
from service.manager.source_lag import kafka_lag
from service.stores.stats_ledger import (
    COUNTERS,
    LANE_BATCHES,
    LANE_PROGRESS,
    OPERATOR_DLQ,
    OPERATOR_STATS,
    REASON_DLQ,
    THROTTLE_COUNTERS,
    StatsLedger,
)

__all__ = ["COUNTERS", "LiveStats", "Recorder", "utc_now"]

#: Persists one batch's counts: `(lane, generation, batch id, counts, seed) -> stored ledger`.
Recorder = Callable[[str, int, int, Mapping[str, Any], Mapping[str, Any] | None], StatsLedger]


class LiveStats:
    """Thread-safe stats of one processor (see the module docstring).

    Args:
        stored: The processor record's persisted `stats` (gauges; counters of versions before
            the ledger, which seed it).
        generation: The checkpoint generation batches are recorded under.
        ledger: The processor's stats ledger, as stored (None before its first batch).
        recorder: Persists each batch's counts (None: kept in memory only, e.g. `sluice
            process` and tests).
        input_from_progress: Count input from progress reports (the engine does not hand it
            over with the batch).
    """

    def __init__(
        self,
        stored: Mapping[str, Any] | None = None,
        *,
        generation: int = 1,
        ledger: StatsLedger | None = None,
        recorder: Recorder | None = None,
        input_from_progress: bool = True,
    ) -> None:
        stored = dict(stored or {})
        self._lock = threading.Lock()
        #: The persisted stats seed a processor's first ledger (counts of earlier versions).
        self._seed: dict[str, Any] | None = stored if ledger is None else None
        self._ledger = ledger if ledger is not None else StatsLedger.seeded(stored)
        self._recorder = recorder
        self.input_from_progress = input_from_progress
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
        self.open_windows: int | None = stored.get("openWindows")
        self.oldest_open: str | None = _iso(stored.get("oldestOpenWindowStart"))
        #: Per-partition lag of a Kafka source from the last progress (None: unknown).
        self.source_lag: dict[str, Any] | None = stored.get("sourceLag")
        self.newest_open: str | None = _iso(stored.get("newestOpenWindowStart"))
        #: The window's operator holding its state (the window operator's stats rows).
        self.state_operator: str | None = stored.get("_stateOperator")
        self._open_by_bucket: dict[int, tuple[int, str | None, str | None]] = {}
        self.generation = generation
        self.last_batch: dict[str, Any] | None = stored.get("_lastBatch")
        #: The last progress report's batch id in this process (gauges are taken once each).
        self._progress_batch: tuple[int, int] = (generation, -1)
        self._state_by_bucket: dict[int, int] = {}
        self._watermark_by_bucket: dict[int, str] = {}
        self.dirty = False

    # ------------------------------------------------------------------ recording

    @property
    def totals(self) -> dict[str, int]:
        """The counters (every batch recorded)."""
        with self._lock:
            current = self._ledger.current()
        return {name: int(current[name]) for name in COUNTERS}

    def new_generation(self, generation: int) -> None:
        """A fresh checkpoint: batch ids start again at 0."""
        with self._lock:
            self.generation = generation
            self._progress_batch = (generation, -1)
            self._state_by_bucket.clear()
            self._watermark_by_bucket.clear()
            self._open_by_bucket.clear()
            self.dirty = True

    def record_batch(
        self,
        batch_id: int,
        *,
        output_sizes: Iterable[int] = (),
        output_count: int | None = None,
        output_bytes: int = 0,
        dlq_records: Iterable[tuple[str, int, str]],
        window_stats: Iterable[Mapping[str, Any]],
        input_metrics: Mapping[str, Any] | None = None,
        sink_operators: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> bool:
        """Count one written micro-batch, persisting its counts before returning; False for a
        replayed batch id (its counts replace the first attempt's) or an older one. Outputs
        are counted from `output_count` and `output_bytes` when given (totals counted where
        the documents were written), else from each document's size (`output_sizes`).
        `sink_operators` are the operator stats the sink counted itself (`$https` as the
        sink), recorded with the enrichment stages' ones."""
        if output_count is None:
            sizes = list(output_sizes)
            output_count, output_bytes = len(sizes), sum(sizes)
        part: dict[str, Any] = {
            "outputMessageCount": output_count,
            "outputMessageSize": output_bytes,
            "dlqMessageCount": 0,
            "dlqMessageSize": 0,
        }
        operators: dict[str, list[int]] = {}
        reasons: dict[str, list[int]] = {}
        for operator, size, reason in dlq_records:
            part["dlqMessageCount"] += 1
            part["dlqMessageSize"] += size
            for keyed, key in ((operators, operator), (reasons, reason)):
                entry = keyed.setdefault(key, [0, 0])
                entry[0] += 1
                entry[1] += size
        part[OPERATOR_DLQ] = operators
        part[REASON_DLQ] = reasons
        window_stats = list(window_stats)
        # The window's results, as the output of the operator its stats rows name.
        results: dict[str, dict[str, Any]] = {}
        for row in window_stats:
            name = row.get("resultsOperator")
            if name:  # rows of older operators name none
                made = results.setdefault(str(name), {"outputMessageCount": 0})
                made["outputMessageCount"] += int(row.get("outputMessageCount", 0) or 0)
        if input_metrics is not None and not self.input_from_progress:
            part["inputMessageCount"] = int(input_metrics.get("count", 0) or 0)
            part["inputMessageSize"] = int(input_metrics.get("bytes", 0) or 0)
            for name in THROTTLE_COUNTERS:
                part[name] = int(input_metrics.get(name, 0) or 0)
            part[OPERATOR_STATS] = dict(input_metrics.get("operators") or {})
        if sink_operators:
            part[OPERATOR_STATS] = add_operators(part.get(OPERATOR_STATS) or {}, sink_operators)
        if results:
            part[OPERATOR_STATS] = add_operators(part.get(OPERATOR_STATS) or {}, results)
        counted = self._record(LANE_BATCHES, batch_id, part)
        with self._lock:
            self._window_stats(window_stats)
            self.dirty = True
        return counted

    def _record(self, lane: str, batch_id: int, part: Mapping[str, Any]) -> bool:
        with self._lock:
            key = (self.generation, batch_id)
            position = self._ledger.position(lane)
            if position is not None and key < position:
                return False
            if self._recorder is not None:
                ledger = self._recorder(lane, self.generation, batch_id, part, self._seed)
            else:
                ledger = self._ledger.record(lane, self.generation, batch_id, part) or self._ledger
            self._ledger = ledger
            self._seed = None
            self.dirty = True
            return position is None or key > position

    def _window_stats(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            bucket = int(row.get("bucket", 0) or 0)
            if "stateSize" in row:
                self._state_by_bucket[bucket] = int(row["stateSize"] or 0)
            if isinstance(row.get("watermark"), dict):
                self._watermark_by_bucket[bucket] = str(row["watermark"].get("$date"))
            if "openWindows" in row:
                oldest = _iso(row.get("minOpenWindowStartTime"))
                newest = _iso(row.get("maxOpenWindowStartTime"))
                self._open_by_bucket[bucket] = (int(row["openWindows"] or 0), oldest, newest)
            if row.get("stateOperator"):
                self.state_operator = str(row["stateOperator"])
        if self._open_by_bucket:
            self.open_windows = sum(count for count, _, _ in self._open_by_bucket.values())
            opened = self._open_by_bucket.values()
            oldest_starts = [start for _, start, _ in opened if start]
            self.oldest_open = min(oldest_starts) if oldest_starts else None
            newest_starts = [start for _, _, start in opened if start]
            self.newest_open = max(newest_starts) if newest_starts else None
        if self._state_by_bucket:
            self.state_size = sum(self._state_by_bucket.values())
        if self._watermark_by_bucket:
            self.watermark = {"$date": max(self._watermark_by_bucket.values())}

    def record_progress(self, progress: Mapping[str, Any]) -> bool:
        """Take one `StreamingQueryProgress`: gauges and the last batch, and the input counts
        when they come from progress reports. False for a batch already counted (or, when
        input comes with the batches, already taken)."""
        batch_id = int(progress.get("batchId", -1))
        counted = False
        if self.input_from_progress:
            observed = (progress.get("observedMetrics") or {}).get(INPUT_METRICS) or {}
            rows = observed.get("count", progress.get("numInputRows", 0))
            part: dict[str, Any] = {
                "inputMessageCount": int(rows or 0),
                "inputMessageSize": int(observed.get("bytes", 0) or 0),
            }
            for source in progress.get("sources") or []:
                for name, value in throttle_figures(source.get("endOffset")).items():
                    part[name] = part.get(name, 0) + value
            part[OPERATOR_STATS] = operator_counts(progress.get("observedMetrics") or {})
            counted = self._record(LANE_PROGRESS, batch_id, part)
        with self._lock:
            key = (self.generation, batch_id)
            newer = key > self._progress_batch
            if newer:
                self._progress_batch = key
                self._progress_gauges(batch_id, progress)
        return counted if self.input_from_progress else newer

    def _progress_gauges(self, batch_id: int, progress: Mapping[str, Any]) -> None:
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
        sources = progress.get("sources") or []
        self.source_lag = kafka_lag(sources[0]) if len(sources) == 1 else None
        durations = progress.get("durationMs") or {}
        self.last_batch = {
            "batchId": batch_id,
            "numInputRows": int(progress.get("numInputRows", 0) or 0),
            "durationMs": int(durations.get("triggerExecution", 0)),
            # Spark's phases of it (`addBatch`, `queryPlanning`, `walCommit`, ...): where a
            # micro-batch's time goes, as Spark's UI shows it.
            "phasesMs": {
                str(name): int(ms)
                for name, ms in durations.items()
                if name != "triggerExecution" and isinstance(ms, int | float)
            },
            "processedRowsPerSecond": float(progress.get("processedRowsPerSecond", 0) or 0),
            "timestamp": progress.get("timestamp"),
        }
        self.dirty = True

    # ------------------------------------------------------------------ reading

    def to_record(self) -> dict[str, Any]:
        """The processor record's `stats`: gauges and the last batch, with a copy of the
        counters (the ledger is their source of truth) and `_operatorDlq`."""
        with self._lock:
            self.dirty = False
            current = self._ledger.current()
            record: dict[str, Any] = {name: current[name] for name in COUNTERS}
            record["stateSize"] = self.state_size
            record["watermark"] = self.watermark
            record["throttle"] = {name: current[name] for name in THROTTLE_COUNTERS}
            record["_operatorDlq"] = {k: list(v) for k, v in current[OPERATOR_DLQ].items()}
            record["_operatorStats"] = current[OPERATOR_STATS]
            record["_reasonDlq"] = {k: list(v) for k, v in current[REASON_DLQ].items()}
            record["openWindows"] = self.open_windows
            record["oldestOpenWindowStart"] = self.oldest_open
            record["newestOpenWindowStart"] = self.newest_open
            record["_stateOperator"] = self.state_operator
            record["sourceLag"] = self.source_lag
            record["_lastBatch"] = self.last_batch
            return record

    def snapshot(self) -> dict[str, Any]:
        """Counters, state size, watermark and the last batch (does not clear `dirty`)."""
        with self._lock:
            current = self._ledger.current()
            out: dict[str, Any] = {name: current[name] for name in COUNTERS}
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
        """Atlas's `stats` object and Sluice's additions (module docstring); `verbose` adds
        `operatorStats` and Spark's last batch."""
        with self._lock:
            current = self._ledger.current()
            out: dict[str, Any] = {
                "name": name,
                "processorId": processor_id,
                "status": status,
                "scaleFactor": scale,
            }
            for counter in COUNTERS:
                value = current[counter]
                out[counter] = value / scale if counter.endswith("Size") and scale != 1 else value
            out["stateSize"] = self.state_size / scale if scale != 1 else self.state_size
            out["watermark"] = self.watermark
            out["eventTimeLagSeconds"] = _lag_seconds(self.watermark)
            out["openWindows"] = self.open_windows
            out["oldestOpenWindowStart"] = self.oldest_open
            out["sourceLag"] = self.source_lag
            out["dlqByReason"] = {k: v[0] for k, v in current[REASON_DLQ].items()}
            out["dlqByOperator"] = {k: v[0] for k, v in current[OPERATOR_DLQ].items()}
            out["lastStateChange"] = last_state_change.astimezone(UTC).isoformat()
            operators = list(operators)
            throttle = {name: current[name] for name in THROTTLE_COUNTERS}
            if THROTTLE_OPERATOR in operators or any(throttle.values()):
                out["throttle"] = throttle
            if verbose:
                out["operatorStats"] = operator_entries(current, list(operators), scale)
                for entry in out["operatorStats"]:
                    if entry["name"] == self.state_operator:
                        entry["stateSize"] = out["stateSize"]
                        entry["minOpenWindowStartTime"] = self.oldest_open
                        entry["maxOpenWindowStartTime"] = self.newest_open
                out["lastBatch"] = self.last_batch
            return out


def _iso(value: Any) -> str | None:
    """A date as an ISO 8601 string (UTC, milliseconds): from `{"$date": ...}`, a datetime
    (as the store decodes a persisted one) or a string."""
    if isinstance(value, Mapping):
        value = value.get("$date")
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return value if isinstance(value, str) else None


def _lag_seconds(watermark: Mapping[str, str] | None) -> float | None:
    """Now − the watermark, in seconds (None without a watermark)."""
    text = _iso(watermark)
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return round((utc_now() - moment).total_seconds(), 3)


def utc_now() -> datetime:
    """The current time (UTC, aware)."""
    return datetime.now(tz=UTC)
