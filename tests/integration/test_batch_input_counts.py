"""Each micro-batch reaches the writer with the input counts Spark reports for it.

The service persists a batch's stats with the batch, before Spark commits it, so the input
counts must be known inside `foreachBatch` (`pipeline_stages/_engine/observed.py`), not only in
the progress event that follows the commit. For a stateless pipeline and a window on both
engines (the batch engine folds in the background and logs the counts with the batch), every
batch's `BatchResult.input` must equal the `observedMetrics` of its progress event.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import INPUT_METRICS, BatchResult
from pipeline_stages._stream.context import CompileContext
from tests.integration.recorded_query import start_recorded_query
from tests.streaming import wait_until

pytestmark = pytest.mark.spark

DOCS = [
    {"i": i, "d": 0 if i == 4 else 1, "ts": f"2024-01-01T00:00:{i:02d}.000Z"} for i in range(11)
]
SOURCE = {"$source": {"documents": DOCS, "timeField": {"$dateFromString": {"dateString": "$ts"}}}}
DIVIDE = {"$addFields": {"r": {"$divide": [1, "$d"]}}}  # i = 4 goes to the DLQ
WINDOW = {
    "$tumblingWindow": {
        "interval": {"size": 3, "unit": "second"},
        "allowedLateness": 0,
        "pipeline": [{"$group": {"_id": None, "n": {"$sum": 1}}}],
    }
}
CASES = {
    "stateless": ([SOURCE, DIVIDE], None),
    "window-operator": ([SOURCE, DIVIDE, WINDOW], "operator"),
    "window-batch-engine": ([SOURCE, DIVIDE, WINDOW], "batch"),
}


class Counts:
    """A `BatchWriter` remembering each batch's input counts and sizes."""

    def __init__(self) -> None:
        self.input: dict[int, dict[str, int] | None] = {}
        self.outputs = 0
        self.dlq = 0

    def write(self, batch: BatchResult) -> None:
        self.input[batch.batch_id] = batch.input
        self.outputs += len(batch.outputs)
        self.dlq += len(batch.dlq)


@pytest.mark.parametrize("case", list(CASES))
def test_every_batch_carries_the_input_counts_spark_reports_for_it(
    spark: Any, tmp_path: Path, case: str
) -> None:
    pipeline, engine = CASES[case]
    register_all(spark)
    ctx = CompileContext(
        spark=spark,
        processor_name="p",
        problems=ProblemCollector(),
        has_dlq=True,
        connections={},
        batch_size=3,
        window_engine=engine,
    )
    compiled = compile_pipeline(parse_pipeline(pipeline), ctx)
    assert (compiled.batch_window is not None) is (engine == "batch")
    name = f"counts_{uuid.uuid4().hex[:8]}"
    writer = Counts()
    query, sink = start_recorded_query(
        spark,
        compiled,
        writer,
        name=name,
        checkpoint=tmp_path / "checkpoint",
        state_dir=str(tmp_path / "window-state"),
    )
    try:

        def read_everything() -> bool:
            read = [json.loads(p.json)["numInputRows"] for p in query.recentProgress]
            return sum(read) >= len(DOCS)

        wait_until(query, read_everything, "every document read", 300)
    finally:
        query.stop()
        sink.close()
    progresses = [json.loads(progress.json) for progress in query.recentProgress]
    reported = {
        p["batchId"]: p["observedMetrics"][INPUT_METRICS]
        for p in progresses
        if INPUT_METRICS in (p.get("observedMetrics") or {})
    }
    assert reported, "no progress reported observed metrics"
    for batch_id, metrics in reported.items():
        # The batch's input may also carry the stages' operator counts (tested elsewhere).
        received = writer.input.get(batch_id) or {}
        assert {key: received.get(key) for key in ("count", "bytes")} == {
            "count": metrics["count"],
            "bytes": metrics["bytes"],
        }, (batch_id, writer.input, reported)
    assert sum(c["count"] for c in writer.input.values() if c) == len(DOCS)
    assert writer.dlq >= 1
