"""`sluice process`: run a pipeline ephemerally on a local SparkSession (Atlas's `sp.process`).

Output is one relaxed Extended JSON object per line on stdout: each emitted document, and each
DLQ record as `{"_dlqMessage": {...}}`. The run ends when a finite source is exhausted and no
window can still be closed by an idleTimeout (open windows are not flushed, as in Atlas).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from pipeline_stages._base import PipelineInvalid, Problem
from pipeline_stages._engine.sink import BatchResult, ForeachBatchSink

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2

#: Atlas stops `sp.process` after 10 minutes.
DEFAULT_MAX_SECONDS = 600.0
POLL_SECONDS = 0.05


@dataclass
class StdoutWriter:
    """Prints results and DLQ records as they are produced; remembers the operator stats."""

    out: TextIO
    print_outputs: bool = True
    open_windows_by_bucket: dict[int, int] = field(default_factory=dict)
    batches: int = 0
    #: Micro-batch id of the latest window stats (None before any).
    stats_batch: int | None = None
    #: Id of the first micro-batch seen with the finite source exhausted (see `_finished`).
    exhausted_batch: int | None = None

    def write(self, batch: BatchResult) -> None:
        """Print one micro-batch in emission order."""
        for kind, index in batch.order:
            if kind == "out" and self.print_outputs:
                self.out.write(batch.outputs[index].doc_json + "\n")
            elif kind == "dlq":
                self.out.write(json.dumps({"_dlqMessage": batch.dlq[index]}) + "\n")
        self.out.flush()
        for stats in batch.stats:
            self.open_windows_by_bucket[int(stats.get("bucket", 0))] = int(stats["openWindows"])
            self.stats_batch = batch.batch_id
        self.batches += 1

    @property
    def open_windows(self) -> int:
        """Open windows reported by the window operator's last stats."""
        return sum(self.open_windows_by_bucket.values())


def split_document(document: Any) -> tuple[Any, dict[str, Any]]:
    """Accept a pipeline array or `{"pipeline": [...], "options": {...}}`."""
    if isinstance(document, dict) and "pipeline" in document:
        extra = set(document) - {"pipeline", "options"}
        if extra:
            raise PipelineInvalid(
                [Problem("extra_forbidden", f"/{sorted(extra)[0]}", "unknown top-level field")]
            )
        options = document.get("options") or {}
        return document["pipeline"], options if isinstance(options, dict) else {}
    return document, {}


def problems_json(error: PipelineInvalid) -> str:
    """The `{"problems": [...]}` body printed for an invalid pipeline."""
    body: dict[str, Any] = {"problems": [p.to_dict() for p in error.problems]}
    if error.warnings:
        body["warnings"] = [w.to_dict() for w in error.warnings]
    return json.dumps(body)


def source_position(progress: dict[str, Any] | None) -> int | None:
    """How many records of a finite source the last completed batch had read up to."""
    if not progress or not progress.get("sources"):
        return None
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    return int(end["index"]) if isinstance(end, dict) and "index" in end else None


def run_process(
    document: Any,
    *,
    out: TextIO,
    err: TextIO,
    batch_size: int | None = None,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    spark_factory: Callable[[], Any] | None = None,
    processor_name: str = "process",
) -> int:
    """Run a pipeline to completion; returns the process exit code."""
    from pipeline_stages import parse_pipeline
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._engine.context import CompileContext
    from pipeline_stages._engine.plan import compile_pipeline
    from pipeline_stages._engine.sources import register_all

    try:
        pipeline, options = split_document(document)
        parsed = parse_pipeline(pipeline)
    except PipelineInvalid as error:
        err.write(problems_json(error) + "\n")
        return EXIT_INVALID
    spark = spark_factory() if spark_factory else _default_session()
    register_all(spark)
    ctx = CompileContext(
        spark=spark,
        processor_name=processor_name,
        problems=ProblemCollector(),
        has_dlq=True,
        batch_size=batch_size,
    )
    try:
        compiled = compile_pipeline(parsed, ctx)
    except PipelineInvalid as error:
        err.write(problems_json(error) + "\n")
        return EXIT_INVALID
    writer = StdoutWriter(out, print_outputs=compiled.sink is None)
    return _run_query(compiled, writer, err=err, max_seconds=max_seconds, name=processor_name)


def _default_session() -> Any:
    from pipeline_stages._engine.session import build_session

    return build_session(master="local[*]", app_name="sluice-process")


def _run_query(
    compiled: Any, writer: StdoutWriter, *, err: TextIO, max_seconds: float, name: str
) -> int:
    checkpoint = tempfile.mkdtemp(prefix="sluice-process-")
    query = (
        compiled.envelopes.writeStream.foreachBatch(ForeachBatchSink(writer, processor=name))
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
        .start()
    )
    deadline = time.monotonic() + max_seconds
    try:
        while not _finished(compiled, query, writer):
            if query.exception() is not None:
                err.write(json.dumps({"error": str(query.exception())}) + "\n")
                return EXIT_FAILED
            if time.monotonic() > deadline:
                err.write(json.dumps({"warning": f"stopped after {max_seconds:g} s"}) + "\n")
                break
            # Polling the query's progress is how we learn a batch finished: with processing-time
            # timeouts in the plan, processAllAvailable() never returns (spark-spike.md §6).
            time.sleep(POLL_SECONDS)
        return EXIT_OK
    finally:
        query.stop()
        shutil.rmtree(checkpoint, ignore_errors=True)


def _finished(compiled: Any, query: Any, writer: StdoutWriter) -> bool:
    """A finite source is exhausted and no window can still close on the clock.

    The window operator's stats are only trusted from the micro-batch that consumed the last
    records onwards: earlier stats describe a stream that was still growing.
    """
    if compiled.finite_total is None:
        return False
    progress = query.lastProgress
    if source_position(progress) != compiled.finite_total:
        return False
    if not compiled.closes_on_clock:
        return True
    if writer.exhausted_batch is None:
        writer.exhausted_batch = int(progress["batchId"])
    fresh = writer.stats_batch is not None and writer.stats_batch >= writer.exhausted_batch
    return fresh and writer.open_windows == 0
