"""The `documents` source: a fixed array of documents, by default one per micro-batch.

Atlas feeds this source one document per batch "so watermarks are processed one doc at a
time", which makes results deterministic; Sluice decides lateness per document anyway, so a
larger `batchSize` gives the same results faster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import (
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.sources.raw_source import RAW_SCHEMA, RawRecordSource
from pipeline_stages._connectors.sources.records import source_record

FORMAT = "sluice_documents"

#: The source type Atlas reports in `_stream_meta.source.type` for this source.
SOURCE_TYPE = "generated"
_META = json.dumps({"type": SOURCE_TYPE})
#: The column names of `RAW_SCHEMA`, in order.
RAW_COLUMNS = tuple(column.split()[0] for column in RAW_SCHEMA.split(","))


class _Range(InputPartition):
    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end


class DocumentsStreamReader(DataSourceStreamReader):
    """Offsets are `{"index": n}`: the number of documents delivered so far."""

    def __init__(self, options: dict[str, str]) -> None:
        # Spark lower-cases option keys.
        self.texts: list[str] = json.loads(options["documents"])
        self.batch_size = max(1, int(options.get("batchsize", "1")))
        self.base_time_ms = int(options.get("basetimems", "0"))

    def initialOffset(self) -> dict[str, Any]:
        """Start before the first document."""
        return {"index": 0}

    def getDefaultReadLimit(self) -> ReadLimit:
        """One micro-batch holds at most `batchSize` documents."""
        return ReadMaxRows(self.batch_size)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Advance by the read limit, stopping at the end of the array."""
        total = len(self.texts)
        if isinstance(limit, ReadAllAvailable):
            return {"index": total}
        step = limit.max_rows if isinstance(limit, ReadMaxRows) else self.batch_size
        return {"index": min(total, int(start["index"]) + step)}

    def reportLatestOffset(self) -> dict[str, Any]:
        """The end of the array: lets progress reports show the remaining backlog."""
        return {"index": len(self.texts)}

    def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Documents between two offsets (`$throttle`)."""
        return int(end["index"]) - int(start["index"])

    def bytes_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Their JSON text's bytes (`$throttle`'s `bytesPerSec`)."""
        texts = self.texts[int(start["index"]) : int(end["index"])]
        return sum(len(text.encode()) for text in texts)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition per micro-batch range."""
        lo, hi = int(start["index"]), int(end["index"])
        return [_Range(lo, hi)] if hi > lo else []

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Yield the documents of the range with their arrival sequence."""
        assert isinstance(partition, _Range)  # noqa: S101 - Spark hands back our own partitions
        for index in range(partition.start, partition.end):
            yield raw_record(index, self.texts[index], self.base_time_ms)


def raw_record(index: int, text: str, base_time_ms: int) -> tuple[Any, ...]:
    """The `RAW_SCHEMA` row of the array's document `index`."""
    raw, error = source_record(text)
    return (0, index, raw, base_time_ms + index, _META, error)


def file_stream(spark: Any, texts: list[str], base_time_ms: int, directory: str) -> Any:
    """The array as one micro-batch of Spark's own JSON file source: the same rows as the
    `documents` source's (`raw_record`), written as JSON lines into `directory` and read back
    with `RAW_SCHEMA`.

    A Python data source makes Spark start a Python process for the source's planning before
    the query's first micro-batch: 0.7-0.9 s, where a file source starts in ~0.1 s
    (`benchmarks/source_start.py`). For runs that never resume from a checkpoint (the file
    is theirs and goes with them) and read the whole array in their first batch; its end
    offset is the file source's (`{"logOffset": 0}`), not `{"index": n}`."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    with (path / "documents.json").open("w", encoding="utf-8") as out:
        for index, text in enumerate(texts):
            row = dict(zip(RAW_COLUMNS, raw_record(index, text, base_time_ms), strict=True))
            out.write(json.dumps(row) + "\n")
    return spark.readStream.schema(RAW_SCHEMA).json(str(path))


class DocumentsDataSource(RawRecordSource):
    """Options: `documents` (a JSON array of texts), `batchSize`, `baseTimeMs`."""

    format_name = FORMAT
    stream_reader = DocumentsStreamReader
