"""`$throttle` on real Spark: every micro-batch fits the bucket, every record arrives, the
stats carry the throttle's figures, and what cannot be throttled is refused at compile time.

Micro-batches are driven with `processAllAvailable()`, which returns whenever the source has
nothing it may read yet (the throttle made the batch wait): the test calls it again until
every record has been written. Nothing here depends on how fast the machine is: the bucket
bounds every batch however long batches take, and the buckets' timing is covered by the unit
tests on an injected clock (`tests/unit/connectors/test_throttle_buckets.py`).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import PipelineInvalid, ProblemCollector
from pipeline_stages._connectors.sources.rate_limit import throttle_figures
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import INPUT_METRICS, BatchResult
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from service.manager.stats import LiveStats
from tests.integration.recorded_query import start_recorded_query

pytestmark = pytest.mark.spark

#: How many times the test asks Spark for more micro-batches before giving up.
MAX_DRIVES = 400


class Recorder:
    """A `BatchWriter` keeping each batch's input counts and the documents written, and
    counting them in the processor stats as the service does."""

    def __init__(self) -> None:
        self.input: dict[int, dict[str, int] | None] = {}
        self.outputs: list[Any] = []
        self.stats = LiveStats(input_from_progress=False)

    def write(self, batch: BatchResult) -> None:
        self.input[batch.batch_id] = batch.input
        self.outputs.extend(json.loads(o.doc_json) for o in batch.outputs)
        self.stats.record_batch(
            batch.batch_id,
            output_sizes=[len(o.doc_json) for o in batch.outputs],
            dlq_records=[],
            window_stats=[],
            input_metrics=batch.input,
        )


def _context(spark: Any, connections: dict[str, ConnectionInfo] | None = None) -> CompileContext:
    register_all(spark)
    return CompileContext(
        spark=spark,
        processor_name="p",
        problems=ProblemCollector(),
        has_dlq=True,
        connections=connections or {},
    )


def _run(spark: Any, tmp_path: Path, pipeline: list[Any], ctx: CompileContext, total: int) -> Any:
    """Run `pipeline` until `total` documents were written; the recorder and the progress."""
    compiled = compile_pipeline(parse_pipeline(pipeline), ctx)
    name = f"throttle_{uuid.uuid4().hex[:8]}"
    recorder = Recorder()
    query, sink = start_recorded_query(
        spark, compiled, recorder, name=name, checkpoint=tmp_path / "checkpoint"
    )
    try:
        for _ in range(MAX_DRIVES):
            if len(recorder.outputs) >= total:
                break
            query.processAllAvailable()
        progress = [json.loads(p.json) for p in query.recentProgress]
    finally:
        query.stop()
        sink.close()
    assert len(recorder.outputs) == total, f"{len(recorder.outputs)} of {total} written"
    return recorder, [p for p in progress if p.get("numInputRows")]


def test_messages_per_sec_bounds_every_batch_and_every_document_arrives(
    spark: Any, tmp_path: Path
) -> None:
    docs = [{"i": i} for i in range(60)]
    pipeline = [
        {"$source": {"documents": docs, "config": {"batchSize": 1000}}},
        {"$throttle": {"messagesPerSec": 20}},
        {"$set": {"seen": True}},
    ]
    recorder, progress = _run(spark, tmp_path, pipeline, _context(spark), total=60)
    counts = {b: c["count"] for b, c in recorder.input.items() if c}
    assert sum(counts.values()) == 60
    assert max(counts.values()) <= 20  # the bucket holds one second's worth
    assert len(counts) >= 3
    assert sorted(d["i"] for d in recorder.outputs) == list(range(60))
    assert all(d["seen"] is True for d in recorder.outputs)
    # The figures the batch carried (from Spark's offset log, inside the batch) are the ones
    # its end offset reports in the progress event, and the stats add them up.
    reported = {
        p["batchId"]: throttle_figures(p["sources"][0]["endOffset"])
        for p in progress
        if INPUT_METRICS in (p.get("observedMetrics") or {})
    }
    for batch_id, figures in reported.items():
        carried = recorder.input[batch_id] or {}
        assert figures == {k: carried[k] for k in figures}, batch_id
    stats = recorder.stats.public(
        name="p",
        processor_id="p",
        status="running",
        last_state_change=datetime.now(tz=UTC),
        operators=["SourceOperator", "ThrottleOperator"],
        verbose=True,
    )
    events = sum((c or {}).get("throttleEvents", 0) for c in recorder.input.values())
    waited = sum((c or {}).get("throttledTimeMs", 0) for c in recorder.input.values())
    assert stats["throttle"] == {"throttledTimeMs": waited, "throttleEvents": events}
    # 60 documents waiting behind a 20-document bucket: every batch but maybe the last was cut.
    assert events >= len(counts) - 1 >= 2
    assert stats["inputMessageCount"] == 60


def test_bytes_per_sec_bounds_the_bytes_of_every_batch_of_a_file(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "files"
    (root / "in").mkdir(parents=True)
    lines = [json.dumps({"i": i, "pad": "x" * 80}) for i in range(30)]
    (root / "in" / "001.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    size = len(lines[0].encode())
    files = ConnectionInfo("files", "File", {"directory": str(root)})
    pipeline = [
        {"$source": {"connectionName": "files", "path": "in"}},
        {"$throttle": {"bytesPerSec": size * 4}},
        {"$project": {"i": 1}},
    ]
    recorder, _ = _run(spark, tmp_path, pipeline, _context(spark, {"files": files}), total=30)
    sizes = [c["bytes"] for c in recorder.input.values() if c and c["count"]]
    assert sum(sizes) == sum(len(line.encode()) for line in lines)
    assert max(sizes) <= size * 4
    assert sorted(d["i"] for d in recorder.outputs) == list(range(30))


@pytest.mark.parametrize(
    ("connection", "throttle", "expected"),
    [
        (
            ConnectionInfo("ingest", "HttpIngest", {}),
            {"bytesPerSec": 1000},
            [("unsupported_option", "/pipeline/1/$throttle/bytesPerSec")],
        ),
        (ConnectionInfo("ingest", "HttpIngest", {}), {"messagesPerSec": 10}, []),
        (
            ConnectionInfo("ingest", "Sample", {}),
            {"bytesPerSec": 10},
            [("unsupported_option", "/pipeline/1/$throttle/bytesPerSec")],
        ),
    ],
)
def test_what_a_source_cannot_throttle_is_refused(
    spark: Any, tmp_path: Path, connection: ConnectionInfo, throttle: Any, expected: Any
) -> None:
    pipeline = [
        {"$source": {"connectionName": "ingest"}},
        {"$throttle": throttle},
    ]
    ctx = _context(spark, {"ingest": connection})
    ctx.data_dir = str(tmp_path / "data")
    parsed = parse_pipeline(pipeline)
    try:
        compile_pipeline(parsed, ctx)
        found: list[tuple[str, str]] = []
    except PipelineInvalid as error:
        found = [(p.code, p.path) for p in error.problems]
        assert all(p.message for p in error.problems)
    assert [f for f in found if "throttle" in f[1]] == expected


def test_throttle_after_a_window_is_refused(spark: Any) -> None:
    pipeline = [
        {"$source": {"documents": [{"t": 1}]}},
        {
            "$tumblingWindow": {
                "interval": {"size": 1, "unit": "second"},
                "pipeline": [{"$group": {"_id": None, "n": {"$sum": 1}}}],
            }
        },
        {"$throttle": {"messagesPerSec": 5}},
    ]
    with pytest.raises(PipelineInvalid) as raised:
        compile_pipeline(parse_pipeline(pipeline), _context(spark))
    assert [(p.code, p.path) for p in raised.value.problems] == [
        ("unsupported_option", "/pipeline/2/$throttle")
    ]
