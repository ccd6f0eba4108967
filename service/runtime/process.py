"""Running one pipeline ephemerally (Atlas's `sp.process`): `sluice process --local` runs it
on a SparkSession of its own, the service (`POST /api/v1/pipelines:process`) on its warm one.

Output is one relaxed Extended JSON object per line on stdout: each emitted document, and each
DLQ record as `{"_dlqMessage": {...}}`. The run ends when a finite source is exhausted and no
window can still be closed by an idleTimeout (open windows are not flushed, as in Atlas).

A pipeline ending in `$merge`/`$emit` writes to its sink instead of printing documents (DLQ
records, the sink's write errors included, are still printed). Connections other than the
built-ins are the ones registered with the service sharing this machine's data directory
(`SLUICE_DATA_DIR`, default `~/.sluice`; `SLUICE_STORE_URL`), and `local` is that
directory's embedded store, as for `sluice serve`. So are Spark settings: the session reads
`SLUICE_SPARK_CONF_FILE`, `SLUICE_SPARK_CONF` and `SLUICE_SPARK_CONF_<key>` variables
(`service.config.spark_conf`), e.g. to run windows on the batch engine. The service passes
its own session, connections, store and a `cancel` event instead (`service.manager.ephemeral`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO, cast

from pipeline_stages import parse_pipeline
from pipeline_stages._base import PipelineInvalid, Problem
from pipeline_stages._connectors.sinks.dispatch import SinkWriter, apply_sink, close_sink
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.session import build_session, start_query
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._stream.context import ConnectionInfo
from pipeline_stages._stream.outputs import PartitionSink
from pipeline_stages._windowing.batch.pipelining import WindowFoldError
from service.config.settings import default_data_dir
from service.config.spark_conf import environment_conf
from service.runtime.assemble import compile_context, compile_run
from service.runtime.lookup_stores import lookup_opener
from service.runtime.sink_resources import (
    ClusterClients,
    StoreSinkResources,
    build_run_partition_sink,
)
from service.stores import open_stores
from service.stores.factory import default_store_url

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
    #: Per bucket, whether an `every` pane is still due (its last stats' `nextPaneDue`).
    panes_due_by_bucket: dict[int, bool] = field(default_factory=dict)
    batches: int = 0
    #: Micro-batch id of the latest window stats (None before any).
    stats_batch: int | None = None
    #: Id of the first micro-batch seen with the finite source exhausted (see `_finished`).
    exhausted_batch: int | None = None
    #: The pipeline's `$merge`/`$emit` sink (None without a sink).
    sink: PartitionSink | SinkWriter | None = None
    #: No `sample` buffer here: a summarised batch needs none of its outputs.
    sample_capacity: int = 0

    @property
    def writes_summaries(self) -> bool:
        """With a sink, partitions write their documents on the executors and only DLQ
        records are printed (`_engine.sink.SummaryWriter`); without one every document is
        printed, so the batch is collected."""
        return hasattr(self.sink, "write_partition")

    @property
    def partition_sink(self) -> PartitionSink | None:
        """The sink the partitions write to."""
        return cast("PartitionSink", self.sink) if self.writes_summaries else None

    def write(self, batch: BatchResult) -> None:
        """Print one micro-batch's documents (without a sink) and DLQ records, in order."""
        if batch.totals is None and not self.writes_summaries:
            apply_sink(cast("SinkWriter | None", self.sink), batch)  # a driver-side writer
        if batch.totals is not None:
            for record in batch.dlq:
                self.out.write(json.dumps({"_dlqMessage": record}) + "\n")
        for kind, index in [] if batch.totals is not None else batch.order:
            if kind == "out" and self.print_outputs:
                self.out.write(batch.outputs[index].doc_json + "\n")
            elif kind == "dlq":
                self.out.write(json.dumps({"_dlqMessage": batch.dlq[index]}) + "\n")
        self.out.flush()
        for stats in batch.stats:
            bucket = int(stats.get("bucket", 0))
            self.open_windows_by_bucket[bucket] = int(stats["openWindows"])
            self.panes_due_by_bucket[bucket] = stats.get("nextPaneDue") is not None
            self.stats_batch = batch.batch_id
        self.batches += 1

    @property
    def open_windows(self) -> int:
        """Open windows reported by the window operator's last stats."""
        return sum(self.open_windows_by_bucket.values())

    @property
    def panes_due(self) -> bool:
        """Whether the window operator's last stats still expect an `every` pane."""
        return any(self.panes_due_by_bucket.values())


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


def source_position(progress: dict[str, Any] | None, total: int | None = None) -> int | None:
    """How many records of a finite source the last completed batch had read up to; `total`:
    the source's records, for a `documents` array read from a file (Spark's file source
    offset `{"logOffset": n}`: the whole array is in its first batch)."""
    if not progress or not progress.get("sources"):
        return None
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    if not isinstance(end, dict):
        return None
    if "index" in end:
        return int(end["index"])
    return total if "logOffset" in end else None


def run_process(
    document: Any,
    *,
    out: TextIO,
    err: TextIO,
    batch_size: int | None = None,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    spark_factory: Callable[[], Any] | None = None,
    processor_name: str = "process",
    connections: Mapping[str, Any] | None = None,
    local_store: Any = None,
    store_url: str | None = None,
    cancel: threading.Event | None = None,
    compile_lock: AbstractContextManager[Any] | None = None,
) -> int:
    """Run a pipeline to completion; returns the process exit code.

    `connections` (name → object with `name`, `type`, `config`), `local_store` (the
    `DocumentStore` of `local`) and `store_url` (what executors open for lookups) default to
    the data directory's (see the module docstring). Setting `cancel` stops the run
    (`EXIT_FAILED`); `compile_lock` is held while the pipeline compiles (a shared session's).
    """
    try:
        pipeline, options = split_document(document)
        parsed = parse_pipeline(pipeline)
    except PipelineInvalid as error:
        err.write(problems_json(error) + "\n")
        return EXIT_INVALID
    try:
        spark = spark_factory() if spark_factory else _default_session()
    except ValueError as error:  # a malformed SLUICE_SPARK_CONF* setting
        err.write(json.dumps({"error": str(error)}) + "\n")
        return EXIT_INVALID
    register_all(spark)
    local = _LocalStore(local_store, store_url)
    try:
        if connections is None:
            connections = local.registered_connections(pipeline)
        # The run's `documents` array as a file Spark reads itself (no Python source process
        # to start first: `sources.documents.file_stream`); deleted with the run.
        with tempfile.TemporaryDirectory(
            prefix="sluice-process-documents-", ignore_cleanup_errors=True
        ) as documents_dir:
            return _compile_and_run(
                parsed,
                ctx_args=(spark, processor_name, batch_size, documents_dir),
                connections=connections,
                local=local,
                out=out,
                err=err,
                run=_RunControl(max_seconds, cancel, compile_lock or nullcontext()),
            )
    finally:
        local.close()


@dataclass(frozen=True)
class _RunControl:
    """How long a run may take, what stops it early, and what guards its compilation."""

    max_seconds: float
    cancel: threading.Event | None
    compile_lock: AbstractContextManager[Any]

    @property
    def cancelled(self) -> bool:
        """Whether the run was asked to stop."""
        return self.cancel is not None and self.cancel.is_set()


def _compile_and_run(
    parsed: Any,
    *,
    ctx_args: tuple[Any, str, int | None, str],
    connections: Mapping[str, Any],
    local: _LocalStore,
    out: TextIO,
    err: TextIO,
    run: _RunControl,
) -> int:
    spark, processor_name, batch_size, documents_dir = ctx_args
    ctx = compile_context(
        spark,
        processor=processor_name,
        connections=connections,
        has_dlq=True,
        batch_size=batch_size,
        # A `documents` array arrives in one micro-batch unless the pipeline or `--batch-size`
        # says otherwise: the same results, the README example's first line 0.7-1 s sooner.
        documents_batch_default=0,
        documents_dir=documents_dir,
        lookup_stores=lookup_opener(local.url(), connections),
    )
    try:
        with run.compile_lock:
            compiled = compile_run(parsed, ctx)
    except PipelineInvalid as error:
        err.write(problems_json(error) + "\n")
        return EXIT_INVALID
    sink = _sink_writer(parsed, connections, local, processor_name)
    writer = StdoutWriter(out, print_outputs=compiled.sink is None, sink=sink)
    try:
        return _run_query(compiled, writer, err=err, run=run, name=processor_name)
    finally:
        close_sink(sink)


class _LocalStore:
    """The data directory's stores, opened only when a pipeline needs them."""

    def __init__(self, documents: Any = None, store_url: str | None = None) -> None:
        self._documents = documents
        self._store_url = store_url
        self._stores: Any = None
        self.clients = ClusterClients()

    def _open(self) -> Any:
        if self._stores is None:
            data_dir = os.environ.get("SLUICE_DATA_DIR") or str(default_data_dir())
            os.makedirs(data_dir, exist_ok=True)
            self._stores = open_stores(os.environ.get("SLUICE_STORE_URL"), data_dir=data_dir)
        return self._stores

    def url(self) -> str:
        """The URL of the data directory's store (what executors open for lookups)."""
        if self._store_url is not None:
            return self._store_url
        data_dir = os.environ.get("SLUICE_DATA_DIR") or str(default_data_dir())
        return os.environ.get("SLUICE_STORE_URL") or default_store_url(data_dir)

    def documents(self) -> Any:
        """The `local` connection's document store."""
        if self._documents is None:
            self._documents = self._open().documents
        return self._documents

    def registered_connections(self, pipeline: Any) -> dict[str, Any]:
        """The registered connections, read only when the pipeline names a non-built-in one."""
        from service.manager.connections import BUILTINS, referenced_connections

        if not referenced_connections(pipeline) - set(BUILTINS):
            return {}
        stored, _ = self._open().connections.list(offset=0, limit=1_000_000)
        return {r.name: ConnectionInfo(r.name, r.type.value, dict(r.config)) for r in stored}

    def close(self) -> None:
        """Close the stores and cluster clients that were opened."""
        self.clients.close()
        if self._stores is not None:
            self._stores.close()


def _sink_writer(parsed: Any, connections: Mapping[str, Any], local: _LocalStore, name: str) -> Any:
    resources = StoreSinkResources(
        local=local.documents, connections=connections, clients=local.clients
    )
    # Each run has a fresh checkpoint whose batch ids restart at 0: the start time keeps
    # the File sink's names of two runs apart (and in order).
    run_tag = datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return build_run_partition_sink(parsed, resources, processor=name, run_tag=run_tag)


def _default_session() -> Any:
    """A local session with the Spark settings the service would take from the environment
    (`service.config.spark_conf`: e.g. `SLUICE_SPARK_CONF_spark__sluice__window__engine=batch`)."""

    conf = environment_conf(os.environ)
    return build_session(master="local[*]", app_name="sluice-process", conf=conf)


def _run_query(
    compiled: Any, writer: StdoutWriter, *, err: TextIO, run: _RunControl, name: str
) -> int:
    checkpoint = tempfile.mkdtemp(prefix="sluice-process-")
    sink = compiled.foreach_batch(writer, processor=name, state_dir=f"{checkpoint}/window-state")
    stream = (
        compiled.envelopes.writeStream.queryName(f"sluice_{name}")
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="0 seconds")
    )
    spark = compiled.envelopes.sparkSession
    query = start_query(
        stream,
        spark,
        idle_batches=compiled.runs_when_idle,
        state_partitions=compiled.state_partitions,
    )
    deadline = time.monotonic() + run.max_seconds
    try:
        while not _finished(compiled, query, writer, sink):
            failure = _failure(query, sink)
            if failure is not None:
                err.write(json.dumps({"error": failure}) + "\n")
                return EXIT_FAILED
            if run.cancelled:
                return EXIT_FAILED  # nobody is reading any more (the client went away)
            if time.monotonic() > deadline:
                err.write(json.dumps({"warning": f"stopped after {run.max_seconds:g} s"}) + "\n")
                break
            # Polling the query's progress is how we learn a batch finished: with processing-time
            # timeouts in the plan, processAllAvailable() never returns (spark-spike.md §6).
            time.sleep(POLL_SECONDS)
        return EXIT_OK
    finally:
        query.stop()
        sink.close()
        shutil.rmtree(checkpoint, ignore_errors=True)


def _failure(query: Any, sink: Any) -> str | None:
    """Why the query failed: its own error, or its batch window engine's background fold's."""
    if query.exception() is not None:
        return str(query.exception())
    if sink.failure is not None:
        return f"the window fold failed: {sink.failure}"
    return None


def _finished(compiled: Any, query: Any, writer: StdoutWriter, sink: Any) -> bool:
    """A finite source is exhausted, no window can still close on the clock and no `every`
    pane is still due (the panes of the last documents fire before the run ends).

    The window operator's stats are only trusted from the micro-batch that consumed the last
    records onwards: earlier stats describe a stream that was still growing. A batch window
    engine writes a batch after Spark reports it (`ForeachBatchSink.flush`).
    """
    if compiled.finite_total is None:
        return False
    progress = query.lastProgress
    if source_position(progress, compiled.finite_total) != compiled.finite_total:
        return False
    try:
        sink.flush()
    except WindowFoldError:
        return False  # the caller reports it (`_failure`)
    if not compiled.closes_on_clock and not compiled.fires_panes_on_clock:
        return True
    if writer.exhausted_batch is None:
        writer.exhausted_batch = int(progress["batchId"])
    fresh = writer.stats_batch is not None and writer.stats_batch >= writer.exhausted_batch
    closed = not compiled.closes_on_clock or writer.open_windows == 0
    return fresh and closed and not (compiled.fires_panes_on_clock and writer.panes_due)
