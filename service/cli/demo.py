"""`sluice demo` and the embedded server it (and `sluice serve`) run.

The demo starts the service on embedded defaults (SQLite, a fresh data directory, a
generated API key, a free loopback port), creates a processor on `sample_stream_solar`
(a tumbling-window `$group` per panel group, invalid readings to the DLQ, results merged
into the built-in `local` connection: the embedded store, no MongoDB needed), starts it, and
shows every output document and DLQ message as it arrives (a live table, or one JSON
object per line with `--json`: `demo_view.py`) for `--seconds` counted from the first result. Then it drops the processor and stops the
service.

Standard error says what the demo is waiting for ("starting Spark…", when the first window
can close) and ends with a summary (records read, results, DLQ records by reason). A failure
is one line saying what failed, never a Python stack trace.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import uvicorn

from service.cli.client import ApiError, SluiceClient, Target, http_client
from service.cli.demo_view import DemoView, view
from service.config.api_key_file import read_key_file
from service.config.settings import Settings

DEMO_PROCESSOR = "solar_demo"
#: How long the demo waits for Spark and then for the first result before it gives up.
STARTUP_SECONDS = 300.0
DEMO_DLQ = {"connectionName": "local", "db": "sluice_demo", "coll": "dlq"}
#: Window results are keyed by `group_id` (`$group`'s `_id`): the collection holds the latest
#: window of each panel group, upserted as windows close.
DEMO_MERGE: dict[str, Any] = {
    "$merge": {"into": {"connectionName": "local", "db": "sluice_demo", "coll": "solar"}}
}

_SOURCE: dict[str, Any] = {
    "$source": {
        "connectionName": "sample_stream_solar",
        "timeField": {"$dateFromString": {"dateString": "$timestamp"}},
    }
}
# About 2% of the sample readings have event_type 1: they go to the DLQ.
_VALIDATE: dict[str, Any] = {
    "$validate": {"validator": {"event_type": 0}, "validationAction": "dlq"}
}

WINDOW_PIPELINE: list[dict[str, Any]] = [
    _SOURCE,
    _VALIDATE,
    {
        "$tumblingWindow": {
            "interval": {"size": 5, "unit": "second"},
            "allowedLateness": {"size": 1, "unit": "second"},
            "idleTimeout": {"size": 10, "unit": "second"},
            "pipeline": [
                {
                    "$group": {
                        "_id": "$group_id",
                        "readings": {"$sum": 1},
                        "avg_watts": {"$avg": "$obs.watts"},
                        "max_temp": {"$max": "$obs.temp"},
                    }
                }
            ],
        }
    },
    DEMO_MERGE,
]


def demo_pipeline() -> list[dict[str, Any]]:
    """The demo processor's pipeline."""
    return WINDOW_PIPELINE


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class EmbeddedServer:
    """uvicorn serving an app from a background thread (no signal handlers)."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self.server.run, name="sluice-server", daemon=True)

    def start(self, timeout: float = 60.0) -> None:
        """Start serving and wait until the socket accepts requests."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the embedded Sluice server did not start")
            time.sleep(0.05)

    def stop(self, timeout: float = 120.0) -> None:
        """Ask uvicorn to shut down (the lifespan stops the queries) and wait."""
        self.server.should_exit = True
        self._thread.join(timeout)


def run_demo(
    *,
    seconds: float,
    out: TextIO,
    err: TextIO,
    data_dir: str | None = None,
    as_json: bool = False,
) -> int:
    """Run the demo (see the module docstring); returns the exit code."""
    directory = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="sluice-demo-"))
    server: EmbeddedServer | None = None
    client: SluiceClient | None = None
    shown: DemoView | None = None
    try:
        server, client = _start(directory, err)
        _wait_for_spark(client, err)
        client.create_processor(DEMO_PROCESSOR, demo_pipeline(), dlq=DEMO_DLQ)
        client.start_processor(DEMO_PROCESSOR)
        err.write(
            "sluice demo: processor started; the first 5 s window closes once the stream's "
            "event time passes its end + 1 s of allowed lateness\n"
        )
        shown = view(out, as_json=as_json)
        if not _follow(client, seconds=seconds, shown=shown, err=err):
            return 1
        shown.close()
        shown = None
        _summary(client, err)
        return 0
    except KeyboardInterrupt:
        if shown is not None:
            shown.close()
            shown = None
        if client is not None:
            _summary(client, err)
        return 130
    except ApiError as error:
        err.write(f"sluice demo: {error}\n")
        return 1
    except Exception as error:  # noqa: BLE001 - one line for the user, not a stack trace
        first_line = (str(error).splitlines() or [""])[0]
        err.write(f"sluice demo: failed: {type(error).__name__}: {first_line}\n")
        return 1
    finally:
        if shown is not None:
            shown.close()
        _cleanup(client, server)
        if data_dir is None:
            shutil.rmtree(directory, ignore_errors=True)


def _start(directory: Path, err: TextIO) -> tuple[EmbeddedServer, SluiceClient]:
    from service.main import create_app

    settings = Settings(data_dir=directory, api_keys=[], default_dlq=None)
    server = EmbeddedServer(create_app(settings))
    server.start()
    client = SluiceClient(http_client(Target(server.url, read_key_file(directory))))
    err.write(
        f"sluice demo: service at {server.url} (data in {directory}); processor {DEMO_PROCESSOR} "
        "on sample_stream_solar (5 s tumbling windows per panel group), merged into local "
        "sluice_demo.solar\n"
    )
    return server, client


def _wait_for_spark(client: SluiceClient, err: TextIO) -> None:
    """Say that Spark is starting, and when it is ready."""
    started = time.monotonic()
    err.write("sluice demo: starting Spark… (15-40 s on a quiet machine)\n")
    err.flush()
    while time.monotonic() - started < STARTUP_SECONDS:
        engine = client.health().get("engine")
        if engine == "ready":
            err.write(f"sluice demo: Spark ready after {time.monotonic() - started:.0f} s\n")
            return
        if engine == "failed":
            detail = client.health().get("engineError") or "unknown error"
            raise ApiError(503, {"errorCode": "ENGINE_UNAVAILABLE", "detail": detail})
        time.sleep(0.5)
    raise ApiError(503, {"errorCode": "ENGINE_UNAVAILABLE", "detail": "Spark did not start"})


def _follow(client: SluiceClient, *, seconds: float, shown: DemoView, err: TextIO) -> bool:
    """Print messages for `seconds` from the first one; False when none came in time."""
    waited = time.monotonic()
    deadline: float | None = None
    cursor = None
    while deadline is None or time.monotonic() < deadline:
        body = client.sample(DEMO_PROCESSOR, limit=1000, after=cursor)
        for message in body["messages"]:
            shown.show(message)
        cursor = body.get("cursorId") or cursor
        if deadline is None and body["messages"]:
            err.write(
                f"sluice demo: first result after {time.monotonic() - waited:.0f} s; "
                f"showing {seconds:g} s of results\n"
            )
            deadline = time.monotonic() + seconds
        if deadline is None and time.monotonic() - waited > STARTUP_SECONDS:
            err.write(f"sluice demo: no result in {STARTUP_SECONDS:g} s; {_state(client)}\n")
            return False
        time.sleep(1.0 if deadline is None else min(1.0, max(0.0, deadline - time.monotonic())))
    return True


def _state(client: SluiceClient) -> str:
    stats = client.stats(DEMO_PROCESSOR)
    error = stats.get("lastError") or {}
    return f"processor {stats.get('status')}" + (
        f", last error: {error.get('message')}" if error else ""
    )


def _summary(client: SluiceClient, err: TextIO) -> None:
    """Records read, results written, DLQ records by reason."""
    try:
        stats = client.stats(DEMO_PROCESSOR)
    except ApiError:
        return
    reasons = ", ".join(f"{n} {reason!r}" for reason, n in (stats.get("dlqByReason") or {}).items())
    err.write(
        f"sluice demo: summary: {stats.get('inputMessageCount', 0)} readings read, "
        f"{stats.get('outputMessageCount', 0)} window results written, "
        f"{stats.get('dlqMessageCount', 0)} to the DLQ"
        + (f" ({reasons})" if reasons else "")
        + "\n"
    )


def _cleanup(client: SluiceClient | None, server: EmbeddedServer | None) -> None:
    if client is not None:
        try:
            client.drop_processor(DEMO_PROCESSOR)
        except ApiError:
            pass
        client.http.close()
    if server is not None:
        server.stop()
