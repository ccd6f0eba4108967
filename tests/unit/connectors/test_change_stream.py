"""The change-stream source's pure parts: offsets, resume tokens, watch() arguments, rows.

The reader itself needs a real MongoDB replica set; it is exercised by
`tests/integration/test_change_stream_source.py` when `MONGODB_URI` is set.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import bson
import pytest
from bson import ObjectId
from bson.binary import Binary
from bson.timestamp import Timestamp

from pipeline_stages import parse_stage
from pipeline_stages._connectors.sources.change_stream import (
    ChangeStreamReader,
    StreamPosition,
    event_row,
    operation_time,
    rows_between,
    source_options,
    target_pipeline,
    token_text,
    token_value,
    watch_arguments,
)

TOKEN = {"_data": "8265A1B2C3000000012B0429296E1404"}


def test_resume_tokens_survive_the_json_checkpoint_with_their_types() -> None:
    token = {"_data": "82AB", "_typeBits": Binary(b"\x01")}
    text = token_text(token)
    assert isinstance(json.loads(text), dict)
    # Binary subtype 0 comes back as `bytes`, which pymongo encodes as the same BSON.
    assert bson.encode(token_value(text)) == bson.encode(token)
    assert token_text(None) is None and token_value(None) is None


def test_positions_round_trip_through_offsets() -> None:
    position = StreamPosition(token_text(TOKEN), 42)
    assert StreamPosition.parse(json.loads(json.dumps(position.to_offset()))) == position
    assert StreamPosition.parse({}) == StreamPosition(None, 0)


def test_watch_arguments_prefer_the_stored_token_over_the_start_time() -> None:
    options = {
        "fullDocument": "updateLookup",
        "fullDocumentBeforeChange": "whenAvailable",
        "startAtOperationTime": {"$timestamp": {"t": 1700000000, "i": 1}},
        "pipeline": [{"$match": {"operationType": "insert"}}],
        "maxAwaitTimeMS": 500,
    }
    first = watch_arguments(options, None)
    assert first == {
        "pipeline": [{"$match": {"operationType": "insert"}}],
        "max_await_time_ms": 500,
        "full_document": "updateLookup",
        "full_document_before_change": "whenAvailable",
        "start_at_operation_time": Timestamp(1700000000, 1),
    }
    resumed = watch_arguments(options, token_text(TOKEN))
    assert resumed["start_after"] == TOKEN and "start_at_operation_time" not in resumed
    defaults = watch_arguments({"fullDocument": "default"}, None)
    assert defaults == {"pipeline": [], "max_await_time_ms": 200}


def test_operation_times_from_timestamps_and_dates() -> None:
    assert operation_time(None) is None
    assert operation_time({"$date": "2024-01-01T00:00:00Z"}) == Timestamp(1704067200, 0)
    with pytest.raises(ValueError, match="timestamp or a date"):
        operation_time("yesterday")


def test_several_collections_narrow_a_database_stream() -> None:
    assert target_pipeline(["a", "b"]) == [{"$match": {"ns.coll": {"$in": ["a", "b"]}}}]
    assert target_pipeline("a") == [] and target_pipeline(None) == []


def event(n: int) -> dict[str, object]:
    return {
        "_id": {"_data": f"82{n:04X}"},
        "operationType": "insert",
        "clusterTime": Timestamp(1704067200 + n, 1),
        "wallTime": datetime(2024, 1, 1, 0, 0, n, tzinfo=UTC),
        "ns": {"db": "shop", "coll": "orders"},
        "documentKey": {"_id": ObjectId("65a1b2c3d4e5f60718293a4b")},
        "fullDocument": {"_id": ObjectId("65a1b2c3d4e5f60718293a4b"), "qty": 2.0, "n": n},
    }


def test_event_rows_carry_relaxed_json_wall_time_and_atlas_metadata() -> None:
    part, seq, raw, ts_ms, meta, error = event_row(event(5), 9, full_document_only=False)
    assert error is None
    assert (part, seq, ts_ms) == (0, 9, 1704067205000)
    doc = json.loads(raw)
    assert doc["operationType"] == "insert"
    assert doc["fullDocument"]["_id"] == {"$oid": "65a1b2c3d4e5f60718293a4b"}
    assert "1.0e0" in raw or "2.0" in raw  # doubles stay doubles
    assert json.loads(meta) == {
        "type": "atlas",
        "operationType": "insert",
        "ns": {"db": "shop", "coll": "orders"},
        "documentKey": {"_id": {"$oid": "65a1b2c3d4e5f60718293a4b"}},
    }
    only = json.loads(event_row(event(5), 9, full_document_only=True)[2])
    assert only["n"] == 5 and "operationType" not in only


def test_rows_are_numbered_after_the_start_position() -> None:
    rows = rows_between([event(1), event(2)], StreamPosition("t", 10), full_document_only=True)
    assert [row[1] for row in rows] == [11, 12]


def test_source_options_from_a_parsed_source() -> None:
    spec = parse_stage(
        {
            "$source": {
                "connectionName": "atlas",
                "db": "shop",
                "coll": "orders",
                "config": {"fullDocument": "updateLookup", "startAfter": TOKEN},
            }
        }
    ).spec
    assert source_options(spec) == {
        "fullDocument": "updateLookup",
        "fullDocumentBeforeChange": "off",
        "fullDocumentOnly": False,
        "startAfter": TOKEN,
    }


def test_a_reader_pickles_without_its_client_or_planned_events() -> None:
    import pickle

    reader = ChangeStreamReader({"uri": "mongodb://h/", "db": "shop", "coll": '"orders"'})
    reader._client = object()
    reader._planned[("a", "b")] = [event(1)]
    copy = pickle.loads(pickle.dumps(reader))
    assert copy._client is None and copy._planned == {}
    assert (copy.db, copy.coll) == ("shop", "orders")
    start = {"token": token_text(TOKEN), "seq": 0}
    assert reader.initialOffset.__func__  # the method exists; calling it needs a server
    assert reader.partitions(start, start) == []
