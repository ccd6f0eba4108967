"""The service's query listener (`service.runtime.progress_listener`) on real Spark: every
finished batch's progress reaches the callback as Spark's own JSON, parsed."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from service.runtime.progress_listener import add_progress_listener

pytestmark = pytest.mark.spark


def test_each_batch_progress_reaches_the_callback_as_sparks_json(
    spark: Any, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text("\n".join(json.dumps({"n": n}) for n in range(3)) + "\n")
    seen: list[tuple[str, dict[str, Any]]] = []
    arrived = threading.Event()

    def callback(query_id: str, progress: dict[str, Any]) -> None:
        seen.append((query_id, progress))
        arrived.set()

    listener = add_progress_listener(spark, callback)
    try:
        query = (
            spark.readStream.schema("n LONG")
            .json(str(source))
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        deadline = time.monotonic() + 60
        while not any(p.get("numInputRows") == 3 for _, p in seen):
            assert time.monotonic() < deadline, f"no progress with 3 input rows: {seen}"
            arrived.wait(1)
            arrived.clear()
    finally:
        spark._jsparkSession.streams().removeListener(listener)
    query_id, progress = next((q, p) for q, p in seen if p.get("numInputRows") == 3)
    assert query_id == str(query.id) == progress["id"]
    assert progress["batchId"] == 0
    assert progress["sources"][0]["numInputRows"] == 3
    assert "addBatch" in progress["durationMs"]
