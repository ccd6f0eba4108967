"""The `scripted` source: micro-batches written to a directory, one file per batch (tests).

Tests and the Spark conformance executor drive a query with it: each call to `write_batch`
writes the next batch file atomically, and the query's next micro-batch reads exactly that
file, so batch boundaries are under the caller's control and nothing waits on a wall clock.

A batch row is `[part, seq, raw, source_ts_ms, meta]` (`RAW_SCHEMA` without `error`, which the
reader fills in as every source does: `records.source_record`). A row whose `part` is
`CLOCK_PART` is a *clock row*: its `source_ts_ms` is a virtual processing time, which the
window operator reads instead of the wall clock when it is compiled with a test clock (see
`runtime.config.WindowSource.test_clock`). A batch holding only a clock row is "time passes
with no input": how a test says `{"idle": "1 minute"}` without waiting a minute.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from pipeline_stages._connectors.sources.raw_source import RawRecordSource
from pipeline_stages._connectors.sources.records import source_record

FORMAT = "sluice_scripted"

#: The `part` of a clock row (real sources number partitions from 0).
CLOCK_PART = -1


def batch_path(directory: str | Path, index: int) -> Path:
    """The file holding batch number `index` (0-based)."""
    return Path(directory) / f"batch-{index:06d}.json"


def write_batch(directory: str | Path, index: int, rows: Sequence[Sequence[Any]]) -> None:
    """Write batch `index` atomically (temp file, then rename) so a reader never sees half."""
    final = batch_path(directory, index)
    temp = final.with_suffix(".tmp")
    temp.write_text(json.dumps([list(row) for row in rows]), encoding="utf-8")
    os.replace(temp, final)


class _Batch(InputPartition):
    def __init__(self, path: str) -> None:
        self.path = path


class ScriptedStreamReader(DataSourceStreamReader):
    """Offsets are `{"index": n}`: the number of batch files consumed so far."""

    def __init__(self, options: dict[str, str]) -> None:
        self.directory = options["dir"]

    def initialOffset(self) -> dict[str, Any]:
        """Start before the first batch file."""
        return {"index": 0}

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:  # noqa: ARG002
        """One batch file per micro-batch: advance by one when the next file exists."""
        index = int(start["index"])
        return {"index": index + 1 if batch_path(self.directory, index).exists() else index}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per batch file in the range."""
        return [
            _Batch(str(batch_path(self.directory, i)))
            for i in range(int(start["index"]), int(end["index"]))
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Yield the rows of one batch file; fractional numbers stay doubles, as every real
        source keeps them (`prefer_double`)."""
        if not isinstance(partition, _Batch):
            raise TypeError(f"unexpected partition {partition!r}")
        for part, seq, raw, ts, meta in json.loads(Path(partition.path).read_text("utf-8")):
            text, error = source_record(raw)
            yield (int(part), int(seq), text, int(ts), meta, error)


class ScriptedDataSource(RawRecordSource):
    """Options: `dir`, the directory the batch files appear in."""

    format_name = FORMAT
    stream_reader = ScriptedStreamReader
