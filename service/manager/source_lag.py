"""Per-partition Kafka source lag from a `StreamingQueryProgress` (issue 27, item 4).

The Kafka reader reports its high watermarks through `reportLatestOffset`, so Spark's progress
already carries `sources[].latestOffset` next to `endOffset` (what the batch processed up to):
lag needs no broker connection per stats call. Offsets are `{topic: {partition: offset}}`,
as JSON text or already parsed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pipeline_stages._connectors.sources.throttled import strip


def _offsets(value: object) -> dict[str, dict[str, int]] | None:
    """`{topic: {partition: offset}}`, or None when the value is not Kafka-shaped."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    found: dict[str, dict[str, int]] = {}
    # A `$throttle` keeps its figures in the offset beside the topics.
    for topic, parts in strip(dict(value)).items():
        if not isinstance(parts, Mapping):
            return None
        # Partitions are numbers: any other shape is not Kafka's (never a stats error).
        if not all(str(p).isdigit() for p in parts):
            return None
        try:
            found[str(topic)] = {str(p): int(o) for p, o in parts.items()}
        except (TypeError, ValueError):
            return None
    return found


def kafka_lag(source: Mapping[str, Any]) -> dict[str, Any] | None:
    """`{"partitions": [{topic, partition, latestOffset, processedOffset, lag}], "totalLag"}`
    for one progress source, or None when it is not Kafka or the latest offset is unknown
    (no data rather than a made-up 0)."""
    latest = _offsets(source.get("latestOffset"))
    processed = _offsets(source.get("endOffset"))
    if not latest or processed is None:
        return None
    rows: list[dict[str, Any]] = []
    lags: list[int | None] = []
    for topic in sorted(latest):
        for partition in sorted(latest[topic], key=int):
            high = latest[topic][partition]
            done = processed.get(topic, {}).get(partition)
            lag = None if done is None else max(0, high - done)
            lags.append(lag)
            rows.append(
                {
                    "topic": topic,
                    "partition": int(partition),
                    "latestOffset": high,
                    "processedOffset": done,
                    "lag": lag,
                }
            )
    known = [lag for lag in lags if lag is not None]
    total = sum(known) if len(known) == len(lags) else None
    return {"partitions": rows, "totalLag": total}
