"""The Spark executor of the conformance suite: transcripts through the real window operator
(`SparkBatchExecutor`: through the batch window engine, `batch.engine`; `SparkStampedExecutor`:
through the operator on documents the source stamped, `spark.unstamped`;
`SparkParallelExecutor`: through the operator with two buckets).

Each transcript runs as one streaming query, compiled by the production planner
(`plan.compile_after_source`) on a scripted source (`sources.scripted`) instead of the
transcript's Kafka connection. Steps are buffered and written as one micro-batch per `expect`:

* an `input` step becomes a clock row at the current virtual time followed by its documents
  (arrival order = a global sequence number, across partitions);
* an `idle` step becomes a clock row `ms` later with no documents after it.

The operator decides lateness per document and splits the batch at clock rows, so one
micro-batch per `expect` gives the same results as one per step, and a transcript costs a
handful of micro-batches instead of one per document.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pipeline_stages import parse_pipeline
from pipeline_stages._base import PipelineInvalid, ProblemCollector
from pipeline_stages._connectors.sources import scripted
from pipeline_stages._connectors.sources.ingest import ingest
from pipeline_stages._engine.plan import compile_after_source
from pipeline_stages._engine.session import query_settings, stream_settings
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._stream.context import CompileContext, SourcePlan
from pipeline_stages._windowing.batch.engine import ENGINE_CONF
from pipeline_stages._windowing.spark.compile import BUCKETS_CONF
from pipeline_stages._windowing.spark.unstamped import UNSTAMPED_CONF
from service.runtime.process import source_position
from tests.conformance.harness import TranscriptMismatch

#: How long one micro-batch may take before the executor gives up (the first one of the run
#: includes Python worker start-up).
BATCH_TIMEOUT_S = 180.0
_ACTIVE: list[Any] = []


def spark_session() -> Any:
    """The test run's SparkSession (the `spark` fixture's, created the same way if needed)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    from pipeline_stages._engine.session import build_session

    return build_session(
        master="local[2]",
        app_name="sluice-tests",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )


@contextmanager
def spark_confs(spark: Any, confs: Mapping[str, str]) -> Iterator[None]:
    """Set Spark confs for the block (a compile reads them), unset after it."""
    for name, value in confs.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name in confs:
            spark.conf.unset(name)


def stop_active() -> None:
    """Stop queries left running by earlier executors (the harness has no stop step)."""
    while _ACTIVE:
        query, sink, directory = _ACTIVE.pop()
        try:
            query.stop()
            sink.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)


atexit.register(stop_active)


def source_type(source: dict[str, Any]) -> str:
    """`_stream_meta.source.type` for a transcript's `$source` (as the reference model)."""
    if "topic" in source:
        return "kafka"
    if "db" in source or "coll" in source:
        return "atlas"
    return "generated"


class Collector:
    """The sink's writer: keeps outputs and DLQ records until drained."""

    def __init__(self) -> None:
        self.emitted: list[dict[str, Any]] = []
        self.dlq: list[dict[str, Any]] = []
        self.stats: list[dict[str, Any]] = []

    def write(self, batch: BatchResult) -> None:
        """Keep one micro-batch's results."""
        self.emitted += [json.loads(out.doc_json) for out in batch.outputs]
        self.dlq += batch.dlq
        self.stats += batch.stats


class SparkExecutor:
    """Runs a transcript's pipeline on Spark; see the module docstring."""

    name = "spark"
    #: Wraps the batch window engine of the sink (tests that replay its batches).
    window_wrapper: Any = None
    #: Spark confs set while the pipeline compiles (the engine, the window's input).
    compile_conf: dict[str, str] = {}

    def start(self, pipeline: list[dict[str, Any]], *, partitions: int = 1) -> None:
        """Compile the pipeline on a scripted source (with `compile_conf`) and start its
        query."""
        stop_active()
        spark = spark_session()
        with spark_confs(spark, self.compile_conf):
            self._start(spark, pipeline, partitions)

    def _start(self, spark: Any, pipeline: list[dict[str, Any]], partitions: int) -> None:
        spark.dataSource.register(scripted.ScriptedDataSource)
        # The sink only marks the end of a transcript's pipeline: results go to the collector.
        try:
            parsed = parse_pipeline([s for s in pipeline if not {"$emit", "$merge"} & set(s)])
        except PipelineInvalid as error:
            # An expected gap is declared with `notimpl`, which expects a mismatch.
            raise TranscriptMismatch(f"Sluice refuses the pipeline: {error}") from error
        spec = parsed.stages[0].spec
        self.directory = tempfile.mkdtemp(prefix="sluice-transcript-")
        ctx = CompileContext(spark=spark, processor_name="spark", problems=ProblemCollector())
        ctx.has_dlq = True
        raw = spark.readStream.format(scripted.FORMAT).option("dir", self.directory).load()
        frame = ingest(
            raw,
            time_field=spec.time_field,
            ts_field=spec.ts_field_name,
            meta_field=spec.stream_meta_field_name,
            operator="SourceOperator",
            problems=ctx.problems,
            path="/pipeline/0/$source/timeField",
        )
        self.meta = json.dumps({"type": source_type(pipeline[0]["$source"])})
        plan = SourcePlan(frame=frame, source_type=source_type(pipeline[0]["$source"]))
        try:
            compiled = compile_after_source(
                parsed, plan, ctx, test_clock=True, partitions=partitions
            )
        except PipelineInvalid as error:
            # A field the engines do not run yet is refused at compile (`unsupported_option`).
            raise TranscriptMismatch(f"Sluice refuses the pipeline: {error}") from error
        self.compiled = compiled
        self.collector = Collector()
        self._start_query()
        self.now_ms = 0
        self.seq = 0
        self.batches = 0
        self.pending: list[list[Any]] = [self._clock()]
        for doc in spec.documents or []:
            self.feed([doc])

    def _start_query(self) -> None:
        sink = self.compiled.foreach_batch(
            self.collector, processor="spark", state_dir=f"{self.directory}/window-state"
        )
        if sink.window is not None and self.window_wrapper is not None:
            self.window_wrapper(sink.window)
        self.sink = sink
        writer = (
            self.compiled.envelopes.writeStream.foreachBatch(sink)
            .option("checkpointLocation", f"{self.directory}/checkpoint")
            .trigger(processingTime="0 seconds")
        )
        # With the settings the service starts it with (`session.stream_settings`).
        spark = self.compiled.envelopes.sparkSession
        with query_settings(spark, stream_settings(spark, self.compiled.state_partitions)):
            self.query = writer.start()
        _ACTIVE.append((self.query, self.sink, self.directory))

    def restart(self) -> None:
        """Stop the query after the micro-batches drained so far and start it again on the
        same checkpoint (and window state): what a processor restart does."""
        self.query.stop()
        self.sink.close()
        self._start_query()

    def _clock(self) -> list[Any]:
        self.seq += 1
        return [scripted.CLOCK_PART, self.seq, None, self.now_ms, self.meta]

    def feed(self, docs: list[dict[str, Any]], partition: int = 0) -> None:
        """One arrival batch: a clock row at the current time, then the documents."""
        self.pending.append(self._clock())
        for doc in docs:
            self.seq += 1
            self.pending.append([partition, self.seq, json.dumps(doc), 0, self.meta])

    def idle(self, ms: int) -> None:
        """Virtual processing time passes with no input."""
        self.now_ms += ms
        self.pending.append(self._clock())

    def drain(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Run the buffered steps as one micro-batch and return what it produced."""
        if self.pending:
            scripted.write_batch(self.directory, self.batches, self.pending)
            self.batches += 1
            self.pending = []
            self._wait(self.batches)
        emitted, dlq = self.collector.emitted, self.collector.dlq
        self.collector.emitted, self.collector.dlq = [], []
        return emitted, dlq

    def _wait(self, batches: int) -> None:
        deadline = time.monotonic() + BATCH_TIMEOUT_S
        while source_position(self.query.lastProgress) != batches:
            error = self.query.exception()
            if error is not None:
                raise RuntimeError(f"query failed: {error}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"batch {batches} not processed in {BATCH_TIMEOUT_S:g} s")
            time.sleep(0.02)
        # The batch engine writes a batch after Spark reports it (`ForeachBatchSink.flush`).
        self.sink.flush()


class SparkBatchExecutor(SparkExecutor):
    """The transcripts through the batch window engine (`batch.engine`) instead of the
    operator; only for pipelines it runs (it fails when the planner chose the operator)."""

    name = "spark-batch"
    compile_conf = {ENGINE_CONF: "batch"}

    def start(self, pipeline: list[dict[str, Any]], *, partitions: int = 1) -> None:
        """Compile with `spark.sluice.window.engine=batch`, and check that it took."""
        super().start(pipeline, partitions=partitions)
        if self.compiled.batch_window is None:
            raise AssertionError("the planner ran this pipeline on the window operator")


class SparkStampedExecutor(SparkExecutor):
    """The operator on documents the source stamped (`spark.sluice.window.unstampedReads` is
    false): the reference for the late copies the engines stamp themselves."""

    name = "spark-stamped"
    compile_conf = {UNSTAMPED_CONF: "false"}


class SparkParallelExecutor(SparkExecutor):
    """The operator with two buckets (`spark.sluice.window.buckets=2`): tumbling and hopping
    `$group` windows split their groups over both, every other window runs in bucket 0; the
    results must be the one bucket's."""

    name = "spark-parallel"
    compile_conf = {BUCKETS_CONF: "2"}
