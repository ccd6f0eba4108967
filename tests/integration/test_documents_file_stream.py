"""The `documents` array read by Spark's own file source (`documents.file_stream`, what
`sluice process` uses for an array read in one micro-batch) gives the `documents` source's
rows, in one micro-batch, and `source_position` sees the whole array read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._connectors.sources import documents
from pipeline_stages._connectors.sources.register import register_all
from service.runtime.process import source_position

pytestmark = pytest.mark.spark

#: Texts as `$source.documents` hands them over, odd ones included: non-ASCII, a line
#: separator inside a string, an Extended JSON date, a number Spark must not round.
TEXTS = [
    json.dumps({"a": 1, "s": "é\u2028ü"}),
    json.dumps({"t": {"$date": "2024-01-01T00:00:00Z"}, "big": 12345678901234567890}),
    json.dumps({"nested": {"x": [1, 2.5, None]}, "f": 1.0}),
    '{"bad": {"$date": 1, "extra": 2}}',
]
BASE_MS = 1_700_000_000_000


def batches(stream: Any, checkpoint: Path) -> tuple[dict[int, list[Any]], Any]:
    """Every micro-batch's rows by batch id, and the query's last progress."""
    seen: dict[int, list[Any]] = {}

    def collect(df: Any, batch_id: int) -> None:
        seen[batch_id] = sorted(tuple(row) for row in df.collect())

    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
        progress = query.lastProgress
    finally:
        query.stop()
    return seen, progress


def test_the_file_stream_reads_the_documents_sources_rows_in_one_batch(
    spark: Any, tmp_path: Path
) -> None:
    register_all(spark)
    python_source = (
        spark.readStream.format(documents.FORMAT)
        .option("documents", json.dumps(TEXTS))
        .option("batchSize", str(len(TEXTS)))
        .option("baseTimeMs", str(BASE_MS))
        .load()
    )
    expected, python_progress = batches(python_source, tmp_path / "python")
    from_file = documents.file_stream(spark, TEXTS, BASE_MS, str(tmp_path / "documents"))
    assert from_file.schema.simpleString() == python_source.schema.simpleString()
    got, file_progress = batches(from_file, tmp_path / "file")
    assert list(got) == [0]  # the whole array in the first micro-batch
    assert got == expected
    assert len(expected[0]) == len(TEXTS) and any(row[5] for row in expected[0])  # one error
    assert source_position(python_progress) == len(TEXTS)
    assert source_position(file_progress, len(TEXTS)) == len(TEXTS)
    assert source_position(file_progress) is None  # without the total it cannot know
