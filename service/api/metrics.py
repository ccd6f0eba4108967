"""`GET /metrics`: Prometheus text exposition (format 0.0.4), written by hand.

Per processor (label `processor`): input/output/DLQ message counts and bytes (counters),
state size, watermark lag (now minus the watermark), the last micro-batch duration, whether
the query runs, and the lifecycle state as a one-hot gauge. Per `HttpIngest` connection:
records accepted and records that were not JSON objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import SupportsFloat

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_STATES = ("CREATED", "STARTED", "STOPPED", "FAILED")


@dataclass(frozen=True)
class ProcessorSample:
    """What `/metrics` reports for one processor."""

    name: str
    state: str
    running: bool
    stats: Mapping[str, object]
    batch_duration_ms: int | None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(stats: Mapping[str, object], key: str) -> float:
    """A numeric stat as a float; 0 when absent or null."""
    value = stats.get(key, 0) or 0
    if not isinstance(value, str | SupportsFloat):
        raise TypeError(f"stat {key!r} is not a number: {value!r}")
    return float(value)


def _watermark_lag(stats: Mapping[str, object], now: datetime) -> float | None:
    watermark = stats.get("watermark")
    if not isinstance(watermark, Mapping) or not isinstance(watermark.get("$date"), str):
        return None
    try:
        moment = datetime.fromisoformat(str(watermark["$date"]).replace("Z", "+00:00"))
    except ValueError:
        return None
    return max(0.0, (now - moment).total_seconds())


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(
        self, name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]]
    ) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self.lines.append(f"{name}{{{labels}}} {value:g}" if labels else f"{name} {value:g}")


def render(
    processors: Iterable[ProcessorSample],
    *,
    ingest_accepted: Mapping[str, int],
    ingest_invalid: Mapping[str, int],
    engine_state: str,
    now: datetime | None = None,
) -> str:
    """The exposition text."""
    now = now or datetime.now(tz=UTC)
    rows = [(f'processor="{_escape(p.name)}"', p) for p in processors]
    out = _Writer()
    counters = (
        (
            "input_messages_total",
            "inputMessageCount",
            "Documents read by $source (DLQ'd included).",
        ),
        ("input_bytes_total", "inputMessageSize", "Bytes read by $source."),
        ("output_messages_total", "outputMessageCount", "Documents emitted."),
        ("output_bytes_total", "outputMessageSize", "Bytes emitted."),
        ("dlq_messages_total", "dlqMessageCount", "Records sent to the DLQ."),
        ("dlq_bytes_total", "dlqMessageSize", "Bytes sent to the DLQ."),
    )
    for suffix, key, help_text in counters:
        samples = [(labels, _number(p.stats, key)) for labels, p in rows]
        out.family(f"sluice_processor_{suffix}", "counter", help_text, samples)
    out.family(
        "sluice_processor_state_size_bytes",
        "gauge",
        "Window state size.",
        [(labels, _number(p.stats, "stateSize")) for labels, p in rows],
    )
    lags = [(labels, _watermark_lag(p.stats, now)) for labels, p in rows]
    out.family(
        "sluice_processor_watermark_lag_seconds",
        "gauge",
        "Wall-clock time minus the watermark.",
        [(labels, lag) for labels, lag in lags if lag is not None],
    )
    out.family(
        "sluice_processor_batch_duration_seconds",
        "gauge",
        "Duration of the last micro-batch.",
        [
            (labels, p.batch_duration_ms / 1000)
            for labels, p in rows
            if p.batch_duration_ms is not None
        ],
    )
    out.family(
        "sluice_processor_running",
        "gauge",
        "1 while the processor's query runs.",
        [(labels, 1.0 if p.running else 0.0) for labels, p in rows],
    )
    out.family(
        "sluice_processor_state",
        "gauge",
        "Lifecycle state (one-hot).",
        [
            (f'{labels},state="{state}"', 1.0 if p.state == state else 0.0)
            for labels, p in rows
            for state in _STATES
        ],
    )
    for name, help_text, values in (
        ("sluice_ingest_records_total", "Records accepted by POST /ingest.", ingest_accepted),
        (
            "sluice_ingest_invalid_records_total",
            "Accepted records that are not JSON objects.",
            ingest_invalid,
        ),
    ):
        samples = [(f'connection="{_escape(c)}"', float(v)) for c, v in sorted(values.items())]
        out.family(name, "counter", help_text, samples)
    out.family(
        "sluice_engine_ready",
        "gauge",
        "1 when Spark is ready.",
        [("", 1.0 if engine_state == "ready" else 0.0)],
    )
    return "\n".join(out.lines) + "\n"
