"""A short in-memory history of every processor's stats, for the console's live charts.

Atlas and Spark's UI chart rates over the last minutes; Sluice's stats are cumulative
counters, so `StatsHistory` keeps a ring buffer per processor (by default a sample every 2 s
for 10 minutes) and turns successive counters into per-second rates. The history is not
persisted: it starts empty with the service, as the charts it feeds only show recent minutes.

`HistorySampler` is the background thread that calls `StatsHistory.sample()`; tests call
`sample()` directly with an explicit clock instead of waiting for the thread.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("sluice.console")

#: Seconds between samples and seconds of history kept.
DEFAULT_INTERVAL_SECONDS = 2.0
DEFAULT_SPAN_SECONDS = 600.0

#: Reads one processor's stats (`ProcessorManager.stats(..., verbose=True)`) by record.
StatsReader = Callable[[], Iterable[Mapping[str, Any]]]


@dataclass(frozen=True)
class Sample:
    """The counters and gauges of one processor at one moment."""

    at: datetime
    status: str
    input_count: int
    output_count: int
    dlq_count: int
    state_size: float
    watermark: datetime | None
    dlq_by_operator: dict[str, int] = field(default_factory=dict)


def _watermark(stats: Mapping[str, Any]) -> datetime | None:
    """The stats' `{"$date": ISO}` watermark as an aware datetime (None when unknown)."""
    value = stats.get("watermark")
    text = value.get("$date") if isinstance(value, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sample_of(stats: Mapping[str, Any], at: datetime) -> Sample:
    """A `Sample` from a processor's (verbose) stats object."""
    by_operator = {
        str(op["name"]): int(op.get("dlqMessageCount") or 0)
        for op in stats.get("operatorStats") or []
        if isinstance(op, Mapping) and "name" in op
    }
    return Sample(
        at=at,
        status=str(stats.get("status", "")),
        input_count=int(stats.get("inputMessageCount") or 0),
        output_count=int(stats.get("outputMessageCount") or 0),
        dlq_count=int(stats.get("dlqMessageCount") or 0),
        state_size=float(stats.get("stateSize") or 0),
        watermark=_watermark(stats),
        dlq_by_operator=by_operator,
    )


def _rate(now: int, before: int, seconds: float) -> float | None:
    """Per-second rate between two counters; None when unknown (first sample, or a counter
    that went backwards because the processor was dropped and re-created)."""
    if seconds <= 0 or now < before:
        return None
    return (now - before) / seconds


def _point(current: Sample, previous: Sample | None) -> dict[str, Any]:
    """One history point as the API presents it (rates need the previous sample)."""
    seconds = (current.at - previous.at).total_seconds() if previous else 0.0
    lag = (current.at - current.watermark).total_seconds() if current.watermark else None

    def rate(now: int, before: int | None) -> float | None:
        return None if before is None else _rate(now, before, seconds)

    dlq_rates = {
        name: rate(count, previous.dlq_by_operator.get(name, 0) if previous else None)
        for name, count in current.dlq_by_operator.items()
    }
    return {
        "time": current.at.isoformat(),
        "status": current.status,
        "inputMessageCount": current.input_count,
        "outputMessageCount": current.output_count,
        "dlqMessageCount": current.dlq_count,
        "stateSize": current.state_size,
        "watermark": current.watermark.isoformat() if current.watermark else None,
        "eventTimeLagSeconds": lag,
        "inputRate": rate(current.input_count, previous.input_count if previous else None),
        "outputRate": rate(current.output_count, previous.output_count if previous else None),
        "dlqRate": rate(current.dlq_count, previous.dlq_count if previous else None),
        "dlqRateByOperator": dlq_rates,
    }


class StatsHistory:
    """Ring buffers of `Sample`s, one per processor name (see the module docstring).

    Args:
        read_stats: Returns the current verbose stats of every processor.
        interval_seconds: The sampler's period (reported to clients, which label charts).
        span_seconds: How much history to keep.
    """

    def __init__(
        self,
        read_stats: StatsReader,
        *,
        interval_seconds: float = DEFAULT_INTERVAL_SECONDS,
        span_seconds: float = DEFAULT_SPAN_SECONDS,
    ) -> None:
        self._read_stats = read_stats
        self.interval_seconds = interval_seconds
        self.capacity = max(2, int(span_seconds / interval_seconds) + 1)
        self._samples: dict[str, deque[Sample]] = {}
        self._lock = threading.Lock()

    def sample(self, at: datetime | None = None) -> None:
        """Record one sample of every processor; forget processors that are gone."""
        moment = at or datetime.now(UTC)
        taken = {str(s["name"]): sample_of(s, moment) for s in self._read_stats()}
        with self._lock:
            for name in list(self._samples):
                if name not in taken:
                    del self._samples[name]
            for name, one in taken.items():
                self._samples.setdefault(name, deque(maxlen=self.capacity)).append(one)

    def points(self, name: str) -> list[dict[str, Any]]:
        """The processor's history, oldest first, with rates (empty when never sampled)."""
        with self._lock:
            samples = list(self._samples.get(name, ()))
        previous: Sample | None = None
        out = []
        for current in samples:
            out.append(_point(current, previous))
            previous = current
        return out


class HistorySampler:
    """A daemon thread calling `history.sample()` every `interval_seconds` until stopped."""

    def __init__(self, history: StatsHistory) -> None:
        self.history = history
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling (idempotent)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="sluice-stats-history", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        # Event.wait doubles as the period and the stop signal, so stop() returns promptly.
        while True:
            try:
                self.history.sample()
            except Exception:  # a store hiccup must not end the charts for the service's life
                log.warning("stats history sample failed", exc_info=True)
            if self._stop.wait(self.history.interval_seconds):
                return
