"""Ephemeral processors: `sluice process` on the service's warm SparkSession.

`POST /api/v1/pipelines:process` runs a pipeline as `sluice process --local` would
(`Engine.process`, which is `service.runtime.process.run_process`: the same writer, the same end-of-input rule, the same
exit codes), but on the service's session, connections and store, so the first result comes
without a JVM start. What the run prints comes back as NDJSON frames, one per line:

* `{"started": {"name": ...}}` first, naming the ephemeral processor;
* `{"out": <line>}` for each line `sluice process` prints on stdout (an output document, or
  `{"_dlqMessage": ...}`), the line's JSON text embedded as it is, so a client can print it
  byte for byte (the text between `{"out":` and the final `}`);
* `{"err": <line>}` for each line it prints on stderr (`{"problems": ...}`, `{"error": ...}`,
  `{"warning": ...}`);
* `{"exit": <code>}` last: 0 done, 1 failed, 2 invalid pipeline.

An ephemeral processor is never stored: it is listed by `GET /processors` while it runs
(`ephemeral: true`), and it stops and disappears when its client disconnects (the route sets
`cancel`), when it ends, or when the service shuts down.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO, cast

from service.config.settings import Settings
from service.errors import ResourceConflict, SluiceError
from service.manager.connections import ConnectionRegistry
from service.manager.runs import summarize_error
from service.manager.stats import utc_now
from service.manager.validate import check_definition
from service.runtime.engine import Engine, ProcessRequest
from service.schemas.processors import PipelineProcess
from service.stores import DocumentStore
from service.stores.factory import default_store_url

log = logging.getLogger("sluice.service")

#: Ephemeral runs at once: each is a Spark query on the service's session.
MAX_RUNS = 8
#: Ephemeral processors are named `process-<8 hex digits>` (never stored, so never clashing
#: with a stored name for longer than the run).
NAME_PREFIX = "process-"
#: How long `close` waits for a cancelled run to stop its query.
STOP_TIMEOUT_SECONDS = 60.0
EXIT_FAILED = 1

#: Output lines an ephemeral processor keeps for the console's sample (`GET .../sample`).
SAMPLE_SIZE = 100

#: Receives one NDJSON frame (a line with its newline), or None after the last one.
Emit = Callable[[str | None], None]


class FrameStream(io.TextIOBase):
    """A text stream that hands each complete line to `emit` as `{"<key>":<line>}`."""

    def __init__(self, key: str, emit: Callable[[str], None]) -> None:
        self._key = key
        self._emit = emit
        self._pending = ""

    def writable(self) -> bool:
        """Always."""
        return True

    def write(self, text: str) -> int:
        """Frame every complete line (the run writes one JSON value per line)."""
        self._pending += text
        while "\n" in self._pending:
            line, self._pending = self._pending.split("\n", 1)
            if line.strip():
                self._emit(f'{{"{self._key}":{line}}}\n')
        return len(text)


@dataclass(eq=False)
class EphemeralRun:
    """One ephemeral processor (see the module docstring)."""

    name: str
    pipeline: list[Any]
    batch_size: int | None
    max_seconds: float
    created_at: datetime = field(default_factory=utc_now)
    cancel: threading.Event = field(default_factory=threading.Event)
    outputs: int = 0
    dlq: int = 0
    thread: threading.Thread | None = None
    #: The newest `out` frames (their JSON text), for `sample`.
    recent: deque[str] = field(default_factory=lambda: deque(maxlen=SAMPLE_SIZE))

    def count(self, frame: str) -> None:
        """Count an `out` frame: a DLQ record or an output document."""
        if frame.startswith('{"out":{"_dlqMessage"'):
            self.dlq += 1
        else:
            self.outputs += 1
        self.recent.append(frame)

    def stats(self) -> dict[str, Any]:
        """`ProcessorStats` of the run: what its output stream tells (no query progress)."""
        return {
            "name": self.name,
            "processorId": self.name,
            "status": "stopping" if self.cancel.is_set() else "running",
            # Unknown without query progress: null ("no data"), never a made-up 0.
            "inputMessageCount": None,
            "inputMessageSize": None,
            "outputMessageCount": self.outputs,
            "outputMessageSize": None,
            "dlqMessageCount": self.dlq,
            "dlqMessageSize": None,
            "stateSize": None,
            "lastStateChange": self.created_at.isoformat(),
        }

    def sample(self, limit: int) -> list[dict[str, Any]]:
        """The newest `limit` output documents and DLQ messages, oldest first."""
        frames = list(self.recent)[-limit:]
        return [json.loads(frame)["out"] for frame in frames]

    def public(self) -> dict[str, Any]:
        """`ProcessorPublic` of a running ephemeral processor."""
        return {
            "_id": self.name,
            "name": self.name,
            "pipeline": self.pipeline,
            "options": {},
            "state": "STOPPED" if self.cancel.is_set() else "STARTED",
            "error": None,
            "stats": self.stats(),
            "createdAt": self.created_at,
            "lastStateChange": self.created_at,
            "warnings": [],
            "ephemeral": True,
        }


class EphemeralRuns:
    """The ephemeral processors of this service."""

    def __init__(
        self,
        *,
        engine: Engine,
        connections: ConnectionRegistry,
        documents: DocumentStore,
        settings: Settings,
    ) -> None:
        self._engine = engine
        self._connections = connections
        self._documents = documents
        self._settings = settings
        self._runs: dict[str, EphemeralRun] = {}
        self._guard = threading.Lock()

    def list(self) -> list[EphemeralRun]:
        """The running ephemeral processors, oldest first."""
        with self._guard:
            return sorted(self._runs.values(), key=lambda run: run.created_at)

    def get(self, name: str) -> EphemeralRun | None:
        """The running ephemeral processor of that name, if any."""
        with self._guard:
            return self._runs.get(name)

    def prepare(self, body: PipelineProcess) -> EphemeralRun:
        """Check the pipeline as `create` does without Spark (`PipelineRejected`, 422), and
        wait for Spark (`EngineUnavailable`, 503), so both are answered before streaming."""
        check_definition(body.pipeline, None, type_of=self._connections.type_of, default_dlq=True)
        with self._guard:
            if len(self._runs) >= MAX_RUNS:
                raise ResourceConflict(
                    f"{MAX_RUNS} ephemeral processors are running; retry when one ends"
                )
        self._engine.ready()
        return EphemeralRun(
            name=NAME_PREFIX + secrets.token_hex(4),
            pipeline=body.pipeline,
            batch_size=body.batchSize,
            max_seconds=body.maxSeconds,
        )

    def start(self, run: EphemeralRun, emit: Emit) -> None:
        """List the run and start it in a thread of its own; frames go to `emit`."""
        with self._guard:
            self._runs[run.name] = run
        run.thread = threading.Thread(
            target=self._work, args=(run, emit), name=f"sluice-{run.name}", daemon=True
        )
        run.thread.start()

    def _work(self, run: EphemeralRun, emit: Emit) -> None:
        def out(frame: str) -> None:
            run.count(frame)
            emit(frame)

        err = cast("TextIO", FrameStream("err", emit))  # a text stream of its own
        code = EXIT_FAILED
        try:
            emit(json.dumps({"started": {"name": run.name}}) + "\n")
            request = ProcessRequest(
                name=run.name,
                pipeline=run.pipeline,
                batch_size=run.batch_size,
                max_seconds=run.max_seconds,
                connections=self._connections.for_engine(),
                local_store=self._documents,
                store_url=self._settings.store_url or default_store_url(self._settings.data_dir),
                out=cast("TextIO", FrameStream("out", out)),
                err=err,
                cancel=run.cancel,
            )
            code = self._engine.process(request)
        except SluiceError as error:
            err.write(json.dumps({"error": error.detail}) + "\n")
        except Exception as error:  # noqa: BLE001 - reported to the client, never a dead stream
            log.exception("ephemeral processor %s failed", run.name)
            err.write(json.dumps({"error": summarize_error(error)}) + "\n")
        finally:
            with self._guard:
                self._runs.pop(run.name, None)
            emit(json.dumps({"exit": code}) + "\n")
            emit(None)

    def close(self) -> None:
        """Cancel every run and wait for their queries to stop (service shutdown)."""
        runs = self.list()
        for run in runs:
            run.cancel.set()
        for run in runs:
            if run.thread is not None:
                run.thread.join(STOP_TIMEOUT_SECONDS)
