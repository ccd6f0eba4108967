"""The real service in process on the test run's SparkSession: routes, manager, Spark engine,
writers and SQLite stores, driven over HTTP with FastAPI's test client.

`InProcessService` runs `create_app` with the real `SparkEngine`; the engine's session is the
`spark` fixture's (`build_session` gets the active one), so starting it costs no JVM, and its
shutdown leaves the session to the fixture. Micro-batches are driven explicitly:
`drain(name)` returns once the processor's query has processed everything its source holds
(`SparkQueryHandle.drain`), never after a sleep.

A query that fails for a document's content is a failed test. On 2 shared cores Spark
sometimes fails a task for itself (a Python worker that does not start in time): that is a
failure of the system, which the service's supervisor retries from the checkpoint, so
`drain` waits for the restart (on the condition, with a deadline) and drains again, and
`assert_running` accepts such a failure and no other.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.config.settings import Settings
from service.main import create_app
from service.runtime.spark_engine import SparkEngine
from service.stores import open_stores

KEY = "in-process-test-key-0123456789"
#: Failures of Spark itself under load (not of a document): retried by the supervisor.
TRANSIENT = ("Python worker failed to connect back", "Python worker exited unexpectedly")
#: How long `drain` waits for the supervisor to restart a query that failed transiently.
RESTART_TIMEOUT_S = 120.0
#: How often `drain` looks for the restarted query.
CHECK_EVERY_S = 0.1


def transient(error: str | None) -> bool:
    """Whether a query's error is one of Spark's own under load (`TRANSIENT`)."""
    return error is not None and any(text in error for text in TRANSIENT)


DLQ = {"connectionName": "local", "db": "deadletters", "coll": "dlq"}


class _SharedSessionEngine(SparkEngine):
    """The Spark engine on the test run's session, which it must not stop."""

    def shutdown(self) -> None:
        """Leave the session to the `spark` fixture."""


class InProcessService:
    """A started app and helpers to run processors on it (see the module docstring)."""

    def __init__(self, client: TestClient, root: Path) -> None:
        self.client = client
        #: The directory of the `files` File connection (source and `$emit` target).
        self.root = root

    @property
    def manager(self) -> Any:
        """The processor manager."""
        return self.client.app.state.services.manager  # type: ignore[attr-defined]

    def add_ingest(self, name: str) -> None:
        """Register an HttpIngest connection (one per test keeps their records apart)."""
        response = self.client.post(
            "/api/v1/connections", json={"name": name, "type": "HttpIngest"}
        )
        assert response.status_code == 201, response.text

    def create_and_start(self, name: str, pipeline: list[Any], *, dlq: bool = True) -> None:
        """Create a processor (with the local DLQ) and start it."""
        body: dict[str, Any] = {"name": name, "pipeline": pipeline}
        if dlq:
            body["options"] = {"dlq": DLQ}
        created = self.client.post("/api/v1/processors", json=body)
        assert created.status_code == 201, created.text
        started = self.client.post(f"/api/v1/processors/{name}:start")
        assert started.status_code == 200, started.text

    def stop(self, *names: str) -> None:
        """Stop processors (an idle query still polls its source: keep the load down)."""
        for name in names:
            stopped = self.client.post(f"/api/v1/processors/{name}:stop")
            assert stopped.status_code == 200, stopped.text

    def ingest(
        self, connection: str, body: bytes, content_type: str = "application/x-ndjson"
    ) -> dict[str, Any]:
        """POST the body to the HttpIngest connection; returns the 202 body."""
        response = self.client.post(
            f"/api/v1/ingest/{connection}", content=body, headers={"Content-Type": content_type}
        )
        assert response.status_code == 202, response.text
        result: dict[str, Any] = response.json()
        return result

    def run(self, name: str) -> Any:
        """The processor's current run (it must be running)."""
        record = self.manager.get(name)
        run = self.manager.runs.get(record.id)
        assert run is not None and run.handle is not None, (
            f"{name} has no running query: {record.state.value} {record.error}"
        )
        return run

    def drain(self, name: str) -> None:
        """Process everything the processor's source holds now (see the module docstring)."""
        deadline = time.monotonic() + RESTART_TIMEOUT_S
        while True:
            handle = self._active_handle(name, deadline)
            try:
                handle.drain()
                return
            except Exception as error:
                if not transient(str(error)) or time.monotonic() > deadline:
                    raise

    def _active_handle(self, name: str, deadline: float) -> Any:
        """The processor's running query, once the supervisor has restarted a failed one."""
        while True:
            record = self.manager.get(name)
            run = self.manager.runs.get(record.id)
            if run is not None and run.handle is not None and run.handle.is_active():
                return run.handle
            if record.state.value != "STARTED" or time.monotonic() > deadline:
                return self.run(name).handle  # fails, naming the processor's error
            time.sleep(CHECK_EVERY_S)

    def assert_running(self, name: str) -> None:
        """The processor is STARTED, its query runs and never failed."""
        record = self.client.get(f"/api/v1/processors/{name}").json()
        assert record["state"] == "STARTED", record
        run = self.run(name)
        assert run.last_error is None or transient(run.last_error.message), run.last_error
        assert run.handle.is_active() and run.handle.failure() is None

    def stats(self, name: str) -> dict[str, Any]:
        """The processor's live stats."""
        stats: dict[str, Any] = self.client.get(f"/api/v1/processors/{name}/stats").json()
        return stats

    def sample_cursor(self, name: str) -> str | None:
        """The cursor of the newest message in the sample buffer (None when empty)."""
        response = self.client.get(f"/api/v1/processors/{name}/sample", params={"limit": 1})
        cursor: str | None = response.json()["cursorId"]
        return cursor

    def sample_after(self, name: str, cursor: str | None) -> list[dict[str, Any]]:
        """The sample messages newer than `cursor` (all of them for None)."""
        params: dict[str, Any] = {"limit": 1000}
        if cursor is not None:
            params["after"] = cursor
        response = self.client.get(f"/api/v1/processors/{name}/sample", params=params)
        assert response.status_code == 200, response.text
        messages: list[dict[str, Any]] = response.json()["messages"]
        return messages

    def outputs(self, name: str) -> list[dict[str, Any]]:
        """The output messages in the sample buffer."""
        return [m for m in self._sample(name) if "_dlqMessage" not in m]

    def sample_dlq(self, name: str) -> list[dict[str, Any]]:
        """The DLQ messages in the sample buffer."""
        return [m["_dlqMessage"] for m in self._sample(name) if "_dlqMessage" in m]

    def _sample(self, name: str) -> list[dict[str, Any]]:
        response = self.client.get(f"/api/v1/processors/{name}/sample", params={"limit": 1000})
        assert response.status_code == 200, response.text
        messages: list[dict[str, Any]] = response.json()["messages"]
        return messages

    def dlq(self, name: str) -> list[dict[str, Any]]:
        """The processor's DLQ records as the API returns them, oldest first."""
        response = self.client.get(f"/api/v1/processors/{name}/dlq", params={"limit": 1000})
        assert response.status_code == 200, response.text
        results: list[dict[str, Any]] = response.json()["results"]
        return results

    def collection(self, db: str, coll: str) -> list[dict[str, Any]]:
        """The documents of a `local` collection (in the stores' in-memory form)."""
        stores = self.client.app.state.services.stores  # type: ignore[attr-defined]
        found: list[dict[str, Any]] = stores.documents.find(db, coll)
        return found

    def emitted_lines(self, directory: str) -> list[str]:
        """Every line the File sink wrote under `directory` of the root, in file order (as
        text: a line may nest deeper than Python's parser recurses)."""
        folder = self.root / directory
        if not folder.is_dir():
            return []
        return [
            line
            for path in sorted(folder.glob("*.jsonl"))
            for line in path.read_text("utf-8").splitlines()
            if line.strip()
        ]


@contextmanager
def in_process_service(tmp_path: Path) -> Iterator[InProcessService]:
    """Start the app (see the module docstring) with an `in` HttpIngest connection and a
    `files` File connection on `tmp_path / "files"`."""
    data_dir, root = tmp_path / "data", tmp_path / "files"
    root.mkdir(parents=True)
    settings = Settings(
        data_dir=data_dir,
        api_keys=[KEY],
        spark_master="local[2]",
        trigger_interval="300 milliseconds",
        restart_attempts=6,
        restart_backoff_seconds=0.5,
        stats_flush_seconds=3600,
    )
    settings.prepare_directories()
    app = create_app(
        settings, engine=_SharedSessionEngine(settings), stores=open_stores(data_dir=data_dir)
    )
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as client:
        for body in (
            {"name": "in", "type": "HttpIngest"},
            {"name": "files", "type": "File", "directory": str(root)},
        ):
            response = client.post("/api/v1/connections", json=body)
            assert response.status_code == 201, response.text
        yield InProcessService(client, root)
