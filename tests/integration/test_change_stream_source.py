"""The change-stream `$source` against a real MongoDB replica set (`MONGODB_URI`).

Change streams need a replica set or sharded cluster; there is no in-process stand-in that
implements them (mongomock has no `watch`), so without `MONGODB_URI` these tests are
skipped, visibly, with the reason below. The pure parts (offsets, resume tokens, watch()
arguments, rows) are unit-tested in `tests/unit/connectors/test_change_stream.py`.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from tests.streaming import wait_until

MONGODB_URI = os.environ.get("MONGODB_URI")
pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        MONGODB_URI is None,
        reason="MONGODB_URI not set: change streams need a real MongoDB replica set; "
        "the change-stream source was NOT tested against a server",
    ),
]


class Collector:
    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []

    def write(self, batch: BatchResult) -> None:
        self.docs += [json.loads(o.doc_json) for o in batch.outputs]


@pytest.fixture
def collection() -> Iterator[Any]:
    from pymongo import MongoClient

    client: Any = MongoClient(MONGODB_URI, tz_aware=True)
    db = client[f"sluice_cs_{uuid.uuid4().hex[:10]}"]
    db.create_collection("orders")
    yield db["orders"]
    client.drop_database(db.name)
    client.close()


def start(spark: Any, collection: Any, checkpoint: Path) -> tuple[Any, Collector]:
    register_all(spark)
    pipeline = [
        {
            "$source": {
                "connectionName": "atlas",
                "db": collection.database.name,
                "coll": collection.name,
                "config": {"fullDocumentOnly": True},
            }
        },
        {"$project": {"_id": 0, "n": 1}},
    ]
    ctx = CompileContext(
        spark=spark,
        processor_name="cs",
        problems=ProblemCollector(),
        connections={"atlas": ConnectionInfo("atlas", "Cluster", {"uri": MONGODB_URI})},
    )
    compiled = compile_pipeline(parse_pipeline(pipeline), ctx)
    collector = Collector()
    query = (
        compiled.envelopes.writeStream.foreachBatch(
            compiled.foreach_batch(collector, processor="cs", state_dir=f"{checkpoint}-window")
        )
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    return query, collector


def wait_for_seq(query: Any, seq: int, timeout: float = 180.0) -> None:
    def delivered() -> bool:
        progress = query.lastProgress
        end = (progress or {}).get("sources", [{}])[0].get("endOffset") if progress else None
        end = json.loads(end) if isinstance(end, str) else end
        return isinstance(end, dict) and int(end.get("seq", 0)) >= seq

    wait_until(query, delivered, f"the change stream to deliver seq {seq}", timeout)


def test_inserts_stream_and_a_restart_resumes_after_the_checkpointed_token(
    spark: Any, collection: Any, tmp_path: Path
) -> None:
    query, first = start(spark, collection, tmp_path / "cp")
    try:
        # The initial offset (the stream's current token) is planned with the first batch.
        wait_until(query, lambda: query.lastProgress is not None, "the first batch", 120)
        collection.insert_many([{"n": 1}, {"n": 2}])
        wait_for_seq(query, 2)
    finally:
        query.stop()
    assert first.docs == [{"n": 1}, {"n": 2}]
    collection.insert_one({"n": 3})  # while the processor is stopped
    query, second = start(spark, collection, tmp_path / "cp")
    try:
        wait_for_seq(query, 3)
    finally:
        query.stop()
    assert second.docs == [{"n": 3}]
