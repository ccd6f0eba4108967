"""Sources' offset arithmetic and generated documents, without Spark."""

from __future__ import annotations

import json

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline_stages._connectors.sources.documents import DocumentsStreamReader
from pipeline_stages._connectors.sources.sample_solar import SampleSolarStreamReader, solar_document
from pipeline_stages._stream.json_text import prefer_double


def documents_reader(count: int, batch: int) -> DocumentsStreamReader:
    texts = [json.dumps({"i": i, "x": 1.0}) for i in range(count)]
    return DocumentsStreamReader({"documents": json.dumps(texts), "batchsize": str(batch)})


def test_documents_advance_by_batch_size_and_stop_at_the_end() -> None:
    reader = documents_reader(5, 2)
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 2
    offsets = [reader.initialOffset()]
    while True:
        nxt = reader.latestOffset(offsets[-1], limit)
        if nxt == offsets[-1]:
            break
        offsets.append(nxt)
    assert [o["index"] for o in offsets] == [0, 2, 4, 5]
    assert reader.latestOffset({"index": 0}, ReadAllAvailable()) == {"index": 5}


def test_documents_read_yields_arrival_sequence_and_double_preserving_text() -> None:
    reader = documents_reader(3, 1)
    (partition,) = reader.partitions({"index": 1}, {"index": 3})
    rows = list(reader.read(partition))
    assert [row[1] for row in rows] == [1, 2]
    assert rows[0][2] == '{"i": 1, "x": 1.0e0}'
    assert json.loads(rows[0][4]) == {"type": "generated"}
    assert reader.partitions({"index": 3}, {"index": 3}) == []


def test_prefer_double_leaves_strings_and_integers_alone() -> None:
    text = '{"a": 1, "b": 2.50, "c": "3.5", "d": [1e3, -0.25], "e": "q\\"1.0"}'
    assert (
        prefer_double(text)
        == '{"a": 1, "b": 2.50e0, "c": "3.5", "d": [1e3, -0.25e0], "e": "q\\"1.0"}'
    )
    assert json.loads(prefer_double(text)) == json.loads(text)


def test_solar_documents_have_atlas_shape_and_are_deterministic() -> None:
    doc = solar_document(42, 1_723_498_861_788)
    assert set(doc) == {"device_id", "group_id", "timestamp", "max_watts", "event_type", "obs"}
    assert doc["timestamp"] == "2024-08-12T21:41:01.788+00:00"
    assert doc["device_id"].startswith("device_") and set(doc["obs"]) == {"watts", "temp"}
    assert 0 <= doc["obs"]["watts"] <= doc["max_watts"]
    assert solar_document(42, 1_723_498_861_788) == doc
    assert solar_document(43, 1_723_498_861_788) != doc


def test_solar_reader_replays_the_same_range_identically() -> None:
    reader = SampleSolarStreamReader({"rate": "100", "startms": "1000"})
    start = reader.initialOffset()
    assert start == {"index": 0, "startMs": 1000}
    (partition,) = reader.partitions(start, {"index": 5, "startMs": 1000})
    first = list(reader.read(partition))
    assert first == list(reader.read(partition))
    assert [row[3] for row in first] == [1000, 1010, 1020, 1030, 1040]
