"""The `documents` source: a fixed array of documents, by default one per micro-batch.

Atlas feeds this source one document per batch "so watermarks are processed one doc at a
time", which makes results deterministic; Sluice decides lateness per document anyway, so a
larger `batchSize` gives the same results faster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import (
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.sources.raw_source import RawRecordSource
from pipeline_stages._connectors.sources.records import source_record

FORMAT = "sluice_documents"

#: The source type Atlas reports in `_stream_meta.source.type` for this source.
SOURCE_TYPE = "generated"


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
        meta = json.dumps({"type": SOURCE_TYPE})
        for index in range(partition.start, partition.end):
            text, error = source_record(self.texts[index])
            yield (0, index, text, self.base_time_ms + index, meta, error)


class DocumentsDataSource(RawRecordSource):
    """Options: `documents` (a JSON array of texts), `batchSize`, `baseTimeMs`."""

    format_name = FORMAT
    stream_reader = DocumentsStreamReader
