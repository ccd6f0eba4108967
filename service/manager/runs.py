"""Running processors: one `Run` per started processor, supervised by one thread.

A `Run` holds the processor's query handle, its live stats and its checkpoint lock. The
supervisor thread notices a query that terminated with an error and restarts it from its
checkpoint with exponential backoff (`restart_backoff_seconds`, doubling); after
`restart_attempts` consecutive failures the processor becomes `FAILED` with the error
message, as Atlas does after its own retries. A micro-batch completed after a restart resets
the count (an idle report does not: a query that fails on every batch must not look healthy
between its batches). The supervisor also persists live stats every `stats_flush_seconds`.

Every failure is reported as it happens, not only the last one: the run keeps the last error
(code, message, time) and how many restarts it has scheduled (`retries`), and the manager
records them on the processor (`error`) and in its stats. A run restarted after a failure or
resumed at service start is `recovering` (what it is doing in `recovering`) until its query
reports its first micro-batch or reports itself idle (nothing to replay).

Failures never raise into API requests: they are recorded on the processor.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pipeline_stages._base import PipelineInvalid
from service.config.settings import Settings
from service.errors import EngineUnavailable, ResourceConflict
from service.manager.stats import LiveStats, utc_now
from service.manager.validate import rejected_by_compiler
from service.runtime.engine import Engine, QueryHandle, RunRequest
from service.runtime.locks import CheckpointBusy, CheckpointLock
from service.runtime.shared_storage import check_shared_storage

log = logging.getLogger("sluice.service")

TICK_SECONDS = 0.25
MAX_ERROR_CHARS = 1000
#: `Run.recovering` of a query replaying its checkpoint (what Spark does first on a start).
REPLAYING = "replaying from checkpoint"
#: The error code of a query that failed or could not be launched.
SPARK_FAILURE = "spark_failure"


@dataclass(frozen=True)
class RunError:
    """A failure of a run: what, when, and how many restarts had been scheduled before it."""

    code: str
    message: str
    time: datetime

    def public(self) -> dict[str, Any]:
        """`{code, message, time}` (time in ISO 8601, UTC)."""
        return {"code": self.code, "message": self.message, "time": self.time.isoformat()}


@dataclass(eq=False)
class Run:
    """One started processor (see the module docstring).

    Attributes:
        failures: Consecutive failures (reset by a completed micro-batch).
        overloads: Consecutive failures of an overloaded machine (`is_overload`), counted
            apart from `failures` and reset the same way.
        retries: Restarts scheduled since the processor started (never reset).
        retry_at: When the next restart is due (monotonic clock), between failure and restart.
        last_error: The last failure.
        recovering: What the run is doing while it recovers (None once it has caught up).
    """

    processor_id: str
    name: str
    generation: int
    stats: LiveStats
    lock: CheckpointLock
    request: RunRequest
    handle: QueryHandle | None = None
    failures: int = 0
    overloads: int = 0
    retries: int = 0
    retry_at: float | None = None
    last_error: RunError | None = None
    recovering: str | None = None


#: Spark's errors when a Python worker it started did not connect back in time: its
#: executor waits 10 s (a constant in `PythonWorkerFactory`), the worker 15 s. A busy machine
#: (seen here at load 8 on 2 cores) makes the workers of Python data sources miss that.
_OVERLOAD_MARKERS = (
    "Python worker failed to connect back",
    "waiting for the Python worker to connect back",
    "CANNOT_OPEN_SOCKET",
)
#: Restarts after overload failures before the processor becomes FAILED, and the longest
#: wait between two (the backoff doubles from `restart_backoff_seconds` up to it): a
#: processor rides out a few minutes of an overloaded machine instead of failing for good.
OVERLOAD_ATTEMPTS = 12
OVERLOAD_MAX_BACKOFF_SECONDS = 30.0


def is_overload(message: str) -> bool:
    """Whether a failure says the machine was too busy, not that the query is wrong."""
    return any(marker in message for marker in _OVERLOAD_MARKERS)


def retry_count(run: Run, restart_attempts: int) -> tuple[int, int]:
    """The run's last failure's retry number and how many it gets (overloads get more)."""
    if run.last_error is not None and is_overload(run.last_error.message):
        return run.overloads, OVERLOAD_ATTEMPTS
    return run.failures, restart_attempts


_PYTHON_ERROR = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*)$")


def summarize_error(error: object) -> str:
    """The error's message without JVM or Python stack traces.

    A failure raised in Python inside a micro-batch reaches us wrapped in Spark's message,
    which embeds the whole traceback and plan; its last `SomeError: message` line is what
    a user needs. Otherwise the first line is.
    """
    text = str(error).split("JVM stacktrace:", 1)[0].strip()
    if "Traceback (most recent call last)" in text:
        raised = [m.group(1) for line in text.splitlines() if (m := _PYTHON_ERROR.match(line))]
        if raised:
            return raised[-1][:MAX_ERROR_CHARS]
    first = text.splitlines()[0] if text else ""
    return first[:MAX_ERROR_CHARS] or type(error).__name__


class RunTable:
    """The runs of this service and the thread supervising them."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        lock_for: Callable[[str], threading.RLock],
        mark_failed: Callable[[Run, str, str], None],
        persist_stats: Callable[[Run], None],
        report_error: Callable[[Run], None],
    ) -> None:
        self._engine = engine
        self._settings = settings
        self._lock_for = lock_for
        self._mark_failed = mark_failed
        self._persist_stats = persist_stats
        self._report_error = report_error
        self._runs: dict[str, Run] = {}
        self._by_query: dict[str, Run] = {}
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_flush = time.monotonic() + settings.stats_flush_seconds

    # ------------------------------------------------------------------ lookup

    def get(self, processor_id: str) -> Run | None:
        """The run of a processor, if it is started in this service."""
        with self._guard:
            return self._runs.get(processor_id)

    def all(self) -> list[Run]:
        """Every run."""
        with self._guard:
            return list(self._runs.values())

    # ------------------------------------------------------------------ launch / halt

    def launch(self, run: Run) -> None:
        """Take the checkpoint lock and start the query (caller holds the processor lock).

        Compile problems raise `PipelineRejected`; an engine that cannot start raises
        `EngineUnavailable`; a checkpoint held by another driver raises `ResourceConflict`;
        local storage that executors of a cluster master cannot reach raises
        `StorageNotShared` (before Spark fails on it later with a less useful message).
        Any other failure is a Spark failure: the run is kept and retried with backoff. A run
        with `recovering` set (resumed at service start) stays recovering until it catches up.
        """
        compile_request = run.request.compile
        check_shared_storage(
            self._settings,
            pipeline=compile_request.pipeline,
            connections=compile_request.connections,
        )
        ids = self._engine.driver_ids()
        try:
            killed = run.lock.acquire(pid=ids["pid"], jvm_pid=ids["jvmPid"])
        except CheckpointBusy as error:
            raise ResourceConflict(str(error)) from None
        if killed:
            log.warning("killed orphan JVM %s still running processor %s", killed, run.name)
        try:
            handle = self._engine.launch(run.request)
        except PipelineInvalid as error:
            run.lock.release()
            raise rejected_by_compiler(error) from None
        except EngineUnavailable:
            run.lock.release()
            raise
        except Exception as error:  # noqa: BLE001 - a Spark failure becomes a retry, never a 500
            with self._guard:
                self._runs[run.processor_id] = run
            self._on_failure(run, summarize_error(error))
            return
        self._attach(run, handle)

    def _attach(self, run: Run, handle: QueryHandle) -> None:
        with self._guard:
            run.handle = handle
            run.retry_at = None
            self._runs[run.processor_id] = run
            self._by_query[handle.query_id] = run

    def halt(self, processor_id: str) -> Run | None:
        """Stop a run's query and release its checkpoint (caller holds the processor lock)."""
        with self._guard:
            run = self._runs.pop(processor_id, None)
            if run is not None and run.handle is not None:
                self._by_query.pop(run.handle.query_id, None)
        if run is None:
            return None
        if run.handle is not None:
            try:
                run.handle.stop()
            except Exception as error:  # noqa: BLE001 - stopping a broken query must not fail
                log.warning("stopping %s: %s", run.name, summarize_error(error))
        # Only once the query has stopped: no batch can be writing through the sink any more.
        close = getattr(run.request.writer, "close", None)
        if close is not None:
            try:
                close()
            except Exception as error:  # noqa: BLE001 - a sink that fails to close must not block
                log.warning("closing the sink of %s: %s", run.name, summarize_error(error))
        run.lock.release()
        return run

    def halt_all(self) -> list[Run]:
        """Stop every run (service shutdown); processors stay STARTED in the store."""
        halted = []
        for run in self.all():
            with self._lock_for(run.processor_id):
                stopped = self.halt(run.processor_id)
            if stopped is not None:
                halted.append(stopped)
        return halted

    # ------------------------------------------------------------------ progress

    def on_progress(self, query_id: str, progress: dict[str, Any]) -> None:
        """Feed a finished micro-batch into the run's stats (listener thread).

        An idle report (`{"idle": true}`: the query has nothing to do) ends a recovery but
        counts nothing and does not reset the failure count.
        """
        with self._guard:
            run = self._by_query.get(query_id)
        if run is None:
            return
        run.recovering = None
        if progress.get("idle"):
            return
        run.stats.record_progress(progress)
        run.failures = run.overloads = 0

    # ------------------------------------------------------------------ supervision

    def start_supervisor(self) -> None:
        """Start the supervisor thread (idempotent)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="sluice-supervisor", daemon=True)
        self._thread.start()

    def stop_supervisor(self) -> None:
        """Stop the supervisor thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(TICK_SECONDS):
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - the supervisor must survive anything
                log.exception("supervisor tick failed")

    def tick(self) -> None:
        """Check every run once: failures, due restarts, stats flushing."""
        now = time.monotonic()
        for run in self.all():
            lock = self._lock_for(run.processor_id)
            if not lock.acquire(blocking=False):
                continue  # an API request is working on this processor
            try:
                if self.get(run.processor_id) is run:
                    self._check(run, now)
            finally:
                lock.release()
        if now >= self._next_flush:
            self._next_flush = now + self._settings.stats_flush_seconds
            self.flush_stats()

    def flush_stats(self) -> None:
        """Persist the stats of every run that changed."""
        for run in self.all():
            if run.stats.dirty:
                with contextlib.suppress(Exception):
                    self._persist_stats(run)

    def _check(self, run: Run, now: float) -> None:
        if run.handle is not None:
            if run.handle.is_active():
                return
            failure = run.handle.failure() or "the query stopped unexpectedly"
            with self._guard:
                self._by_query.pop(run.handle.query_id, None)
                run.handle = None
            self._on_failure(run, summarize_error(failure))
        elif run.retry_at is not None and now >= run.retry_at:
            self._relaunch(run)

    def _relaunch(self, run: Run) -> None:
        log.info("restarting processor %s from its checkpoint (attempt %d)", run.name, run.failures)
        run.recovering = (
            f"{REPLAYING} after an error (retry {run.failures} of "
            f"{self._settings.restart_attempts})"
        )
        try:
            handle = self._engine.launch(run.request)
        except PipelineInvalid as error:
            self._give_up(run, "invalid_pipeline", str(error))
            return
        except Exception as error:  # noqa: BLE001 - a Spark failure becomes a retry
            self._on_failure(run, summarize_error(error))
            return
        self._attach(run, handle)

    def _on_failure(self, run: Run, message: str, code: str = SPARK_FAILURE) -> None:
        run.last_error = RunError(code, message, utc_now())
        overloaded = is_overload(message)
        if overloaded:
            run.overloads += 1
        else:
            run.failures += 1
        attempt, attempts = retry_count(run, self._settings.restart_attempts)
        if attempt > attempts:
            self._give_up(run, code, message)
            return
        delay = self._settings.restart_backoff_seconds * 2 ** (attempt - 1)
        if overloaded:
            delay = min(delay, OVERLOAD_MAX_BACKOFF_SECONDS)
        run.retry_at = time.monotonic() + delay
        run.retries += 1
        run.recovering = None
        try:
            self._report_error(run)
        except Exception:  # noqa: BLE001 - reporting must not stop the retry
            log.exception("recording the error of processor %s", run.name)
        log.warning(
            "processor %s failed%s (%d/%d), retrying in %.1f s: %s",
            run.name,
            " on a busy machine" if overloaded else "",
            attempt,
            attempts,
            delay,
            message,
        )

    def _give_up(self, run: Run, code: str, message: str) -> None:
        last = run.last_error
        if last is None or (last.code, last.message) != (code, message):
            run.last_error = RunError(code, message, utc_now())
        with self._guard:
            self._runs.pop(run.processor_id, None)
        run.lock.release()
        log.error("processor %s FAILED: %s", run.name, message)
        self._mark_failed(run, code, message)
