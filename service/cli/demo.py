"""`sluice demo` and the embedded server it (and `sluice serve`) run.

The demo starts the service on embedded defaults (SQLite, a fresh data directory, a
generated API key, a free loopback port), creates a processor on `sample_stream_solar`
(a tumbling-window `$group` per panel group, invalid readings to the DLQ, results merged
into the built-in `local` connection: the embedded store, no MongoDB needed), starts it, and
prints every output document and DLQ message as it arrives, one JSON object per line,
until `--seconds` pass. Then it drops the processor and stops the service.
"""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import uvicorn

from service.cli.client import ApiError, SluiceClient, Target, http_client
from service.config.settings import Settings

DEMO_PROCESSOR = "solar_demo"
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


def run_demo(*, seconds: float, out: TextIO, err: TextIO, data_dir: str | None = None) -> int:
    """Run the demo (see the module docstring); returns the exit code."""
    from service.main import create_app

    directory = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="sluice-demo-"))
    settings = Settings(data_dir=directory, api_keys=[], default_dlq=None)
    server = EmbeddedServer(create_app(settings))
    server.start()
    from service.auth import read_key_file

    client = SluiceClient(http_client(Target(server.url, read_key_file(directory))))
    err.write(
        f"sluice demo: service at {server.url} (data in {directory}); processor {DEMO_PROCESSOR} "
        "on sample_stream_solar (5 s tumbling windows per panel group) "
        f"for {seconds:g} s, merged into local sluice_demo.solar; Spark needs 15-40 s "
        "before the first results\n"
    )
    try:
        client.create_processor(DEMO_PROCESSOR, demo_pipeline(), dlq=DEMO_DLQ)
        client.start_processor(DEMO_PROCESSOR)
        _follow(client, seconds=seconds, out=out)
        return 0
    except ApiError as error:
        err.write(f"sluice demo: {error}\n")
        return 1
    finally:
        _cleanup(client, server)
        if data_dir is None:
            shutil.rmtree(directory, ignore_errors=True)


def _follow(client: SluiceClient, *, seconds: float, out: TextIO) -> None:
    deadline = time.monotonic() + seconds
    cursor = None
    while time.monotonic() < deadline:
        body = client.sample(DEMO_PROCESSOR, limit=1000, after=cursor)
        for message in body["messages"]:
            out.write(json.dumps(message) + "\n")
        out.flush()
        cursor = body.get("cursorId") or cursor
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def _cleanup(client: SluiceClient, server: EmbeddedServer) -> None:
    try:
        client.drop_processor(DEMO_PROCESSOR)
    except ApiError:
        pass
    client.http.close()
    server.stop()
