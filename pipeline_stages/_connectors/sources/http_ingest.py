"""The `HttpIngest` source: records posted to `POST /ingest/{connection}`, read from the spool.

The service appends every posted record durably to the connection's spool
(`pipeline_stages._connectors.sources.spool.Spool`, `<data_dir>/spool/<connection>/`) before it answers 202; this
source reads the spool files directly, so it needs no connection to the service and works in
Spark's Python workers (which run in other processes).

Offsets are `{"seq": n}`: the last spool sequence number consumed. Sequence numbers are
gap-free and durable, so a replayed micro-batch reads exactly the same records. A new query
starts after `startSeq` (the spool's end when the processor was started, like Kafka's
`auto_offset_reset: latest`; 0 for `earliest`); a query restarted from its checkpoint resumes
from the checkpointed offset instead.

A spool record's payload is `encode_record(raw, arrival_ms)`: the arrival time as 8 bytes
(big-endian milliseconds) followed by the bytes as received. The arrival time is the
document's event time when the pipeline has no `timeField`, and stays the same on replay.
Payloads are passed through unparsed: invalid JSON reaches `ingest`, which sends it to the DLQ;
what Spark would misread (bytes that are not UTF-8, ...) is flagged first (`records`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.sources.raw_source import RawRecordSource
from pipeline_stages._connectors.sources.records import source_record
from pipeline_stages._connectors.sources.spool import Spool

FORMAT = "sluice_http_ingest"

#: The source type reported in `_stream_meta.source.type`.
SOURCE_TYPE = "httpIngest"

#: Records per micro-batch unless the query sets `maxRecordsPerBatch`.
DEFAULT_MAX_PER_BATCH = 10_000

_ARRIVAL = struct.Struct(">q")


def encode_record(raw: bytes, arrival_ms: int) -> bytes:
    """The spool payload for one posted record: arrival time, then the bytes as received."""
    return _ARRIVAL.pack(arrival_ms) + raw


def decode_record(payload: bytes) -> tuple[int, bytes]:
    """`(arrival_ms, raw)` of a spool payload written by `encode_record`."""
    if len(payload) < _ARRIVAL.size:
        return 0, payload
    return _ARRIVAL.unpack_from(payload)[0], payload[_ARRIVAL.size :]


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end


class HttpIngestStreamReader(DataSourceStreamReader):
    """Offsets are `{"seq": n}`: every record with sequence number <= n has been read."""

    def __init__(self, options: dict[str, str]) -> None:
        # Spark lower-cases option keys.
        self.data_dir = options["datadir"]
        self.connection = options["connection"]
        self.start_seq = max(0, int(options.get("startseq", "0")))
        self.max_per_batch = max(1, int(options.get("maxrecordsperbatch", DEFAULT_MAX_PER_BATCH)))

    def _spool(self) -> Any:
        return Spool(Path(self.data_dir))

    def initialOffset(self) -> dict[str, Any]:
        """Start after `startSeq` (the spool's end when the processor was started)."""
        return {"seq": self.start_seq}

    def getDefaultReadLimit(self) -> ReadLimit:
        """Bound a catch-up batch after a pause."""
        return ReadMaxRows(self.max_per_batch)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Every durably appended record, within the read limit."""
        latest = self._spool().latest_seq(self.connection)
        begin = int(start["seq"])
        if not isinstance(limit, ReadAllAvailable) and isinstance(limit, ReadMaxRows):
            latest = min(latest, begin + limit.max_rows)
        return {"seq": max(begin, latest)}

    def reportLatestOffset(self) -> dict[str, Any]:
        """The spool's end: lets progress reports show the backlog."""
        return {"seq": self._spool().latest_seq(self.connection)}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per micro-batch range (records `start + 1 .. end`)."""
        lo, hi = int(start["seq"]), int(end["seq"])
        return [_Range(lo + 1, hi)] if hi > lo else []

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Yield the records of the range with their spool sequence numbers."""
        if not isinstance(partition, _Range):
            raise TypeError(f"unexpected partition {partition!r}")
        for seq, payload in self._spool().read(self.connection, partition.start, partition.end):
            arrival_ms, raw = decode_record(payload)
            text, error = source_record(raw)
            meta = json.dumps({"type": SOURCE_TYPE, "connectionName": self.connection, "seq": seq})
            yield (0, seq, text, arrival_ms, meta, error)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the spool keeps records for every reader (retention is separate)."""


class HttpIngestDataSource(RawRecordSource):
    """Options: `dataDir`, `connection`, `startSeq`, `maxRecordsPerBatch`."""

    format_name = FORMAT
    stream_reader = HttpIngestStreamReader
