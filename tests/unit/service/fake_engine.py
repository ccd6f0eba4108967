"""An in-process stand-in for the Spark engine, for API and lifecycle tests without a JVM.

It compiles nothing and runs nothing: what these tests check is the manager's state machine,
stores and HTTP shapes. Everything Spark does is covered by the integration and e2e suites.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

from pipeline_stages._base import Problem
from service.errors import EngineUnavailable
from service.runtime.engine import CompileRequest, ProcessRequest, ProgressCallback, RunRequest


class FakeQuery:
    """A query that runs until stopped, or until `fail` is called."""

    def __init__(self) -> None:
        self.query_id = str(uuid.uuid4())
        self._active = True
        self._failure: str | None = None

    def is_active(self) -> bool:
        """Whether the fake query is running."""
        return self._active

    def failure(self) -> str | None:
        """The failure injected with `fail`, if any."""
        return self._failure

    def fail(self, message: str) -> None:
        """Terminate the fake query with an error (as a Spark failure would)."""
        self._failure = message
        self._active = False

    def stop(self) -> None:
        """Stop the fake query."""
        self._active = False


class FakeEngine:
    """An engine that compiles nothing and runs nothing (API and lifecycle tests).

    Attributes:
        launches: Every run request, in order.
        queries: The fake queries handed out, in order.
        fail_next_launches: How many next launches raise (to test retries).
    """

    def __init__(self) -> None:
        self.launches: list[RunRequest] = []
        self.queries: list[FakeQuery] = []
        self.fail_next_launches = 0
        #: Every ephemeral run, in order; `unavailable`: why `ready` fails (None: it does not).
        self.processes: list[ProcessRequest] = []
        self.unavailable: str | None = None
        self._state = "stopped"
        self._callback: ProgressCallback | None = None
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """`ready` once started."""
        return self._state

    @property
    def batch_input_metrics(self) -> bool:
        """Nothing runs: input is counted from the progress tests feed."""
        return False

    def start(self) -> None:
        """Become ready at once."""
        self._state = "ready"

    def set_progress_callback(self, callback: ProgressCallback) -> None:
        """Remember the callback (tests call `progress` to feed it)."""
        self._callback = callback

    def progress(self, query_id: str, progress: dict[str, Any]) -> None:
        """Feed one progress report, as the Spark listener would."""
        if self._callback is not None:
            self._callback(query_id, progress)

    def check(self, request: CompileRequest) -> list[Problem]:  # noqa: ARG002
        """Nothing to compile: no warnings, no problems."""
        return []

    def launch(self, request: RunRequest) -> FakeQuery:
        """Hand out a running fake query (or fail, when asked to)."""
        with self._lock:
            self.launches.append(request)
            if self.fail_next_launches > 0:
                self.fail_next_launches -= 1
                raise RuntimeError("injected launch failure")
            query = FakeQuery()
            self.queries.append(query)
            return query

    def driver_ids(self) -> dict[str, int]:
        """This process; there is no JVM."""
        import os

        return {"pid": os.getpid(), "jvmPid": 0}

    def ready(self) -> None:
        """Ready at once (503 when `unavailable` says why not)."""
        if self.unavailable is not None:
            raise EngineUnavailable(self.unavailable)
        self.start()

    def process(self, request: ProcessRequest) -> int:
        """Print a `documents` source's documents (no stage runs); any other source prints
        nothing and runs until cancelled or `max_seconds` have passed, as an endless stream."""
        self.processes.append(request)
        source = request.pipeline[0]["$source"]
        if "documents" in source:
            for doc in source["documents"]:
                request.out.write(json.dumps(doc, separators=(",", ":")) + "\n")
            request.out.flush()
            return 0
        request.out.write(json.dumps({"waiting": request.name}) + "\n")
        request.out.flush()
        request.cancel.wait(request.max_seconds)
        return 1 if request.cancel.is_set() else 0

    def shutdown(self) -> None:
        """Become stopped."""
        self._state = "stopped"
