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

A large micro-batch is cut into up to `parallelism` ranges of sequence numbers, one task each;
the driver tells each task where its first record is (`spool_read`), and tasks read and check
records in Arrow batches (`arrow_records`).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.sources.arrow_records import checked, raw_batch
from pipeline_stages._connectors.sources.raw_source import RawRecordSource
from pipeline_stages._connectors.sources.spool import Spool
from pipeline_stages._connectors.sources.spool_read import Position, SpoolIndex, read_payloads

FORMAT = "sluice_http_ingest"

#: The source type reported in `_stream_meta.source.type`.
SOURCE_TYPE = "httpIngest"

#: Records per micro-batch unless the query sets `maxRecordsPerBatch`.
DEFAULT_MAX_PER_BATCH = 10_000
#: Fewer records than this per task are not worth a task of their own.
MIN_ROWS_PER_TASK = 4_096

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
    """Records `start..end` (inclusive); `position` is where record `start` is, if known."""

    def __init__(self, start: int, end: int, position: Position | None = None) -> None:
        self.start = start
        self.end = end
        self.position = position


class HttpIngestStreamReader(DataSourceStreamReader):
    """Offsets are `{"seq": n}`: every record with sequence number <= n has been read."""

    def __init__(self, options: dict[str, str]) -> None:
        # Spark lower-cases option keys.
        self.data_dir = options["datadir"]
        self.connection = options["connection"]
        self.start_seq = max(0, int(options.get("startseq", "0")))
        self.max_per_batch = max(1, int(options.get("maxrecordsperbatch", DEFAULT_MAX_PER_BATCH)))
        self.tasks = max(1, int(options.get("parallelism", "1")))
        self.min_rows_per_task = max(1, int(options.get("minrowspertask", MIN_ROWS_PER_TASK)))
        # Driver only (not pickled): the spool keeps its tail between triggers, the index
        # where the last batch ended.
        self._driver_spool: Spool | None = None
        self._index: SpoolIndex | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_driver_spool"] = state["_index"] = None
        return state

    def _spool(self) -> Spool:
        if self._driver_spool is None:
            self._driver_spool = Spool(Path(self.data_dir))
        return self._driver_spool

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

    def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Records between two offsets (`$throttle`)."""
        return int(end["seq"]) - int(start["seq"])

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """Records `start + 1 .. end`, cut over up to `parallelism` tasks of at least
        `minRowsPerTask` records, each told where its first record is (`spool_read`)."""
        lo, hi = int(start["seq"]), int(end["seq"])
        if hi <= lo:
            return []
        total = hi - lo
        count = max(1, min(self.tasks, total // self.min_rows_per_task))
        size = -(-total // count)
        firsts = list(range(lo + 1, hi + 1, size))
        if self._index is None:
            self._index = SpoolIndex(self._spool(), self.connection)
        positions = self._index.locate(firsts, hi)
        lasts = [f - 1 for f in firsts[1:]] + [hi]
        return [_Range(f, e, p) for f, e, p in zip(firsts, lasts, positions, strict=True)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The range's records as Arrow batches of `RAW_SCHEMA` rows."""
        if not isinstance(partition, _Range):
            raise TypeError(f"unexpected partition {partition!r}")
        spool = Spool(Path(self.data_dir))
        prefix = (
            f'{{"type": {json.dumps(SOURCE_TYPE)}, '
            f'"connectionName": {json.dumps(self.connection)}, "seq": '
        )
        for records in read_payloads(
            spool, self.connection, partition.start, partition.end, partition.position
        ):
            yield records_batch(records, prefix)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the spool keeps records for every reader (retention is separate)."""


def records_batch(records: list[tuple[int, bytes]], meta_prefix: str) -> pa.RecordBatch:
    """`RAW_ARROW` rows of spool records `(seq, encode_record payload)`."""
    seqs = np.fromiter((seq for seq, _ in records), np.int64, len(records))
    if all(len(payload) >= _ARRIVAL.size for _, payload in records):
        heads = b"".join([payload[: _ARRIVAL.size] for _, payload in records])
        arrival = np.frombuffer(heads, ">i8").astype(np.int64)
        everything = pa.array([p for _, p in records], pa.binary())
        # An explicit stop: pyarrow 26's `binary_slice` without one fails on some arrays.
        payloads = pc.binary_slice(everything, _ARRIVAL.size, 2**31 - 1)
    else:  # written by something else than `encode_record`: as `decode_record` reads it
        decoded = [decode_record(payload) for _, payload in records]
        arrival = np.array([ms for ms, _ in decoded], np.int64)
        payloads = pa.array([raw for _, raw in decoded], pa.binary())
    raw, error = checked(payloads)
    meta = pc.binary_join_element_wise(meta_prefix, pa.array(seqs).cast(pa.string()), "}", "")
    return raw_batch(part=0, seq=seqs, raw=raw, source_ts_ms=arrival, meta=meta, error=error)


class HttpIngestDataSource(RawRecordSource):
    """Options: `dataDir`, `connection`, `startSeq`, `maxRecordsPerBatch`, `parallelism`
    (tasks a large batch is cut into), `minRowsPerTask`."""

    format_name = FORMAT
    stream_reader = HttpIngestStreamReader
