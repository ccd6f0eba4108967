"""The Spark engine: one SparkSession per service, one Structured Streaming query per run.

The session starts in a background thread when the service starts (a JVM takes 15-40 s
here), so the API answers at once; requests that need Spark wait for it, up to
`engine_start_timeout_seconds`. A streaming query listener (`progress_listener`) forwards
every query's progress to the manager (stats, metrics), and its idle reports as
`{"idle": true}` (a query resumed from its checkpoint with nothing to replay has caught up).
Each query writes through `foreachBatch` into the run's `ProcessorWriter`, with its own
checkpoint directory and a processing-time trigger, and hands the writer each batch's input
counts with the batch (`pipeline_stages._engine.observed`), so the stats of a batch are
persisted with it.

On a cluster master the start also ships Sluice's packages to the executors and checks
that they run the driver's Python minor version (`service.runtime.spark_code`). A failed check is
fatal: the engine stays `failed` (not retried on every request, as a transient failure is)
and every request that needs Spark answers 503 with the reason.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from pipeline_stages import parse_pipeline
from pipeline_stages._base import Problem
from pipeline_stages._engine.observed import InputMetrics
from pipeline_stages._engine.session import SESSION_CONF_LOCK, start_query
from pipeline_stages._windowing.batch.engine import ENGINE_CONF
from pipeline_stages._windowing.spark.compile import conf_bucket_count
from service.config.settings import Settings
from service.errors import EngineUnavailable
from service.runtime.assemble import compile_context, compile_run
from service.runtime.engine import CompileRequest, ProcessRequest, ProgressCallback, RunRequest
from service.runtime.lookup_stores import lookup_opener
from service.runtime.process import run_process
from service.runtime.progress_listener import add_progress_listener
from service.runtime.spark_code import ExecutorEnvironmentError, check_executors, ship_code
from service.runtime.window_pins import (
    WINDOW_STATE_DIR,
    checkpoint_buckets,
    checkpoint_engine,
    checkpoint_timers,
    record_timers,
)
from service.stores.factory import default_store_url

log = logging.getLogger("sluice.service")


class SparkQueryHandle:
    """A running `StreamingQuery` and its `foreachBatch` sink."""

    def __init__(self, query: Any, sink: Any) -> None:
        self._query = query
        #: The query's `ForeachBatchSink`: a batch window engine folds in the background.
        self._sink = sink
        self.query_id = str(query.id)
        #: What Spark's UI and log call the query: `<processor> (<id>)`.
        self.query_name = str(query.name)

    def is_active(self) -> bool:
        """Whether the query runs. A failed background fold stops it: the query itself would
        only fail at its next batch, which may be long in coming."""
        if self._sink.failure is not None and self._query.isActive:
            self.stop()
        return bool(self._query.isActive)

    def failure(self) -> str | None:
        """The exception that terminated the query, as text."""
        if self._query.isActive:
            return None
        folded = self._sink.failure
        if folded is not None:
            return f"the window fold failed: {folded}"
        error = self._query.exception()
        return None if error is None else str(error)

    def drain(self) -> None:
        """Return once every record its source holds now is processed and written (Spark's
        `processAllAvailable`, then the sink's pending folds): how tests drive micro-batches
        without waiting on the clock. Raises the query's error if it fails meanwhile."""
        self._query.processAllAvailable()
        self._sink.flush()

    def stop(self) -> None:
        """Stop the query and wait for its stream thread and the sink's last write."""
        self._query.stop()
        error = self._sink.close()
        if error is not None:
            log.warning("query %s: the last window fold failed: %s", self.query_id, error)


class SparkEngine:
    """The real engine (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._session: Any = None
        self._state = "stopped"
        self._error: str | None = None
        self._ready = threading.Event()
        self._lock = threading.Lock()
        # Compiles exclude each other and every query start on the session (its conf).
        self._compile_lock = SESSION_CONF_LOCK
        self._callback: ProgressCallback | None = None
        self._jvm_pid = 0
        self._fatal = False

    @property
    def state(self) -> str:
        """`stopped`, `starting`, `ready` or `failed`."""
        return self._state

    @property
    def batch_input_metrics(self) -> bool:
        """Each batch's input counts reach the writer with the batch (`InputMetrics`)."""
        return True

    @property
    def error(self) -> str | None:
        """Why the engine failed to start, if it did."""
        return self._error if self._state == "failed" else None

    def set_progress_callback(self, callback: ProgressCallback) -> None:
        """Receive every query's progress."""
        self._callback = callback

    def start(self) -> None:
        """Start the session in a background thread (idempotent; retried after a failure)."""
        with self._lock:
            if self._state in ("starting", "ready") or self._fatal:
                return
            self._state = "starting"
            self._ready.clear()
        threading.Thread(target=self._boot, name="sluice-spark-boot", daemon=True).start()

    def _conf(self) -> dict[str, str]:
        cores = os.cpu_count() or 2
        conf = {
            "spark.sql.shuffle.partitions": str(max(1, min(cores, 8))),
            "spark.default.parallelism": str(max(1, min(cores, 8))),
            "spark.sql.streaming.stopTimeout": "60000",
        }
        conf.update(self._settings.effective_spark_conf)
        return conf

    def _prepare_executors(self, session: Any) -> None:
        """Ship Sluice's code and check the executors' Python (cluster masters only)."""
        settings = self._settings
        ship = settings.spark_ship_code
        if ship == "always" or (ship == "auto" and not settings.is_local_master):
            ship_code(session, settings.data_dir / "spark-code")
        if not settings.is_local_master:
            check_executors(session, timeout=settings.executor_check_timeout_seconds)

    def _boot(self) -> None:
        try:
            from pipeline_stages._connectors.sources.register import register_all
            from pipeline_stages._engine.session import build_session

            session = build_session(
                master=self._settings.spark_master, app_name="sluice-service", conf=self._conf()
            )
            try:
                self._prepare_executors(session)
            except ExecutorEnvironmentError:
                session.stop()
                raise
            register_all(session)
            add_progress_listener(session, self._on_progress)
            jvm = session._jvm
            if jvm is None:
                raise RuntimeError("the Spark session has no JVM gateway")
            self._jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
            self._session = session
            self._state = "ready"
            log.info("Spark is ready (master %s)", self._settings.spark_master)
        except ExecutorEnvironmentError as error:
            self._error = str(error)[:1000]
            self._fatal = True
            self._state = "failed"
            log.critical("Spark executors cannot run Sluice: %s", error)
        except Exception as error:  # noqa: BLE001 - reported through state and EngineUnavailable
            self._error = str(error).split("\n", 1)[0][:500]
            self._state = "failed"
            log.exception("Spark failed to start")
        finally:
            self._ready.set()

    def _on_progress(self, query_id: str, progress: dict[str, Any]) -> None:
        if self._callback is not None:
            self._callback(query_id, progress)

    def session(self) -> Any:
        """The SparkSession, waiting for it to start.

        Raises:
            EngineUnavailable: When Spark failed to start or did not start in time.
        """
        if self._state in ("stopped", "failed"):
            self.start()
        if not self._ready.wait(self._settings.engine_start_timeout_seconds):
            raise EngineUnavailable("Spark is still starting; retry in a moment")
        if self._session is None:
            raise EngineUnavailable(f"Spark failed to start: {self._error or 'unknown error'}")
        return self._session

    def ready(self) -> None:
        """Wait for the session (`EngineUnavailable` when there is none)."""
        self.session()

    def process(self, request: ProcessRequest) -> int:
        """Run a pipeline as `sluice process` does, on this session (`runtime.process`)."""
        return run_process(
            request.pipeline,
            out=request.out,
            err=request.err,
            batch_size=request.batch_size,
            max_seconds=request.max_seconds,
            spark_factory=self.session,
            processor_name=request.name,
            connections=request.connections,
            local_store=request.local_store,
            store_url=request.store_url,
            cancel=request.cancel,
            compile_lock=self._compile_lock,
        )

    def driver_ids(self) -> dict[str, int]:
        """This process and its JVM (for checkpoint lock files)."""
        self.session()
        return {"pid": os.getpid(), "jvmPid": self._jvm_pid}

    def _compile(
        self,
        request: CompileRequest,
        window_engine: str | None = None,
        window_buckets: int | None = None,
        window_timers: bool | None = None,
    ) -> tuple[Any, list[Problem]]:
        ctx = compile_context(
            self.session(),
            processor=request.name,
            connections=request.connections,
            has_dlq=request.has_dlq,
            data_dir=str(self._settings.data_dir),
            window_engine=window_engine,
            window_buckets=window_buckets,
            window_timers=window_timers,
            lookup_stores=lookup_opener(
                self._settings.store_url or default_store_url(self._settings.data_dir),
                request.connections,
            ),
        )
        with self._compile_lock:
            compiled = compile_run(parse_pipeline(request.pipeline), ctx)
        return compiled, list(ctx.problems.warnings)

    def check(self, request: CompileRequest) -> list[Problem]:
        """Compile without starting; returns the compiler's warnings."""
        _, warnings = self._compile(request)
        return warnings

    def launch(self, request: RunRequest) -> SparkQueryHandle:
        """Compile the pipeline (on its checkpoint's window engine and bucket count) and start
        its query."""

        configured = self.session().conf.get(ENGINE_CONF, "operator") or "operator"
        # Read before `checkpoint_engine` records a new checkpoint's engine.
        timers = checkpoint_timers(request.checkpoint_dir)
        engine = checkpoint_engine(request.checkpoint_dir, configured)
        buckets = checkpoint_buckets(request.checkpoint_dir, conf_bucket_count(self.session()))
        compiled, _ = self._compile(
            request.compile, window_engine=engine, window_buckets=buckets, window_timers=timers
        )
        request.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        if timers is None and compiled.window_timers is not None:
            record_timers(request.checkpoint_dir, compiled.window_timers)
        # Spark's UI and logs show the query by this name: the processor's, and its id,
        # which keeps it unique among the session's active queries.
        query_name = f"{request.compile.name} ({request.processor_id})"
        sink = compiled.foreach_batch(
            request.writer,
            processor=request.compile.name,
            # The batch window engine's state: the driver's, so always local.
            state_dir=str(request.checkpoint_dir / WINDOW_STATE_DIR),
            input_counts=InputMetrics(self.session(), query_name),
        )
        writer = (
            compiled.envelopes.writeStream.queryName(query_name)
            .foreachBatch(sink)
            .option("checkpointLocation", self.checkpoint_location(request))
        )
        query = start_query(
            writer,
            self.session(),
            idle_batches=compiled.runs_when_idle,
            interval_ms=self._settings.trigger_interval_ms,
            state_partitions=compiled.state_partitions,
        )
        return SparkQueryHandle(query, sink)

    def checkpoint_location(self, request: RunRequest) -> str:
        """Where Spark checkpoints a run: the local directory, or the same relative path
        under `SLUICE_CHECKPOINT_ROOT` when that is a Hadoop URI."""
        uri = self._settings.spark_checkpoint_uri
        if uri is None:
            return str(request.checkpoint_dir)
        relative = request.checkpoint_dir.relative_to(self._settings.checkpoint_root)
        return f"{uri}/{relative.as_posix()}"

    def shutdown(self) -> None:
        """Stop the session (the manager stopped the queries already)."""
        session, self._session = self._session, None
        self._state = "stopped"
        if session is not None:
            try:
                session.stop()
            except Exception as error:  # noqa: BLE001 - shutting down anyway
                log.warning("stopping Spark: %s", str(error).split("\n", 1)[0])
