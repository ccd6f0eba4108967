"""The `sample_stream_solar` source: Atlas's solar-panel sample stream, generated.

Documents look like Atlas's: `{device_id: "device_8", group_id: 7, timestamp:
"2024-08-12T21:41:01.788+00:00", max_watts: 450, event_type: 0, obs: {watts: 252, temp: 17}}`.
Generation is a pure function of the sequence number (seeded per document), so a replayed
micro-batch regenerates exactly the same documents.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.sources.raw_source import RawRecordSource
from pipeline_stages._stream.json_text import prefer_double

FORMAT = "sluice_sample_solar"
SOURCE_TYPE = "generated"
DEVICES = 20


class _Range(InputPartition):
    def __init__(self, start: int, end: int, start_ms: int, rate: float) -> None:
        self.start = start
        self.end = end
        self.start_ms = start_ms
        self.rate = rate


def solar_document(seq: int, event_ms: int) -> dict[str, Any]:
    """The sample document number `seq`, generated at `event_ms`."""
    rng = random.Random(seq)
    device = rng.randrange(DEVICES)
    max_watts = 250 + 50 * (device % 5)
    stamp = datetime.fromtimestamp(event_ms / 1000, tz=UTC)
    return {
        "device_id": f"device_{device}",
        "group_id": device % 10,
        "timestamp": stamp.isoformat(timespec="milliseconds"),
        "max_watts": max_watts,
        "event_type": 1 if rng.random() < 0.02 else 0,
        "obs": {"watts": rng.randrange(0, max_watts + 1), "temp": rng.randrange(5, 35)},
    }


class SampleSolarStreamReader(DataSourceStreamReader):
    """Offsets are `{"index": n, "startMs": t0}`: documents due since `t0` at `rate`/s."""

    def __init__(self, options: dict[str, str]) -> None:
        self.rate = float(options.get("rate", "10"))
        self.start_ms = int(options.get("startms", "0")) or int(time.time() * 1000)
        self.max_per_batch = int(options.get("maxperbatch", "100000"))

    def initialOffset(self) -> dict[str, Any]:
        """Generation starts now (or at `startMs`)."""
        return {"index": 0, "startMs": self.start_ms}

    def getDefaultReadLimit(self) -> ReadLimit:
        """Bound a catch-up batch after a pause."""
        return ReadMaxRows(self.max_per_batch)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Every document whose generation time has passed, within the read limit."""
        due = int((time.time() * 1000 - int(start["startMs"])) * self.rate / 1000)
        if not isinstance(limit, ReadAllAvailable) and isinstance(limit, ReadMaxRows):
            due = min(due, int(start["index"]) + limit.max_rows)
        return {"index": max(int(start["index"]), due), "startMs": int(start["startMs"])}

    def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Documents between two offsets (`$throttle`)."""
        return int(end["index"]) - int(start["index"])

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per micro-batch range."""
        lo, hi = int(start["index"]), int(end["index"])
        return [_Range(lo, hi, int(start["startMs"]), self.rate)] if hi > lo else []

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Generate the documents of the range."""
        assert isinstance(partition, _Range)  # noqa: S101 - Spark hands back our own partitions
        meta = json.dumps({"type": SOURCE_TYPE})
        for seq in range(partition.start, partition.end):
            event_ms = partition.start_ms + int(seq * 1000 / partition.rate)
            doc = prefer_double(json.dumps(solar_document(seq, event_ms)))
            yield (0, seq, doc, event_ms, meta, None)


class SampleSolarDataSource(RawRecordSource):
    """Options: `rate` (documents per second, default 10), `startMs` (generation start)."""

    format_name = FORMAT
    stream_reader = SampleSolarStreamReader
