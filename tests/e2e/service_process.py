"""The real service in a subprocess (`sluice serve`), and the real CLI against it.

`ServiceProcess` starts `sluice serve` on a free loopback port with its own data directory,
waits until `/healthz` reports Spark ready, and can stop it with SIGTERM or kill it with
SIGKILL. No API key is configured: the service generates one in its data directory and the
CLI (run as a subprocess with `SLUICE_DATA_DIR`) finds it there, as on a real machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from pipeline_stages._engine import class_archive

T = TypeVar("T")

SLUICE = (
    [shutil.which("sluice")]
    if shutil.which("sluice")
    else [sys.executable, "-m", "service.cli.app"]
)

#: Settings that keep the test service small and quick on 2 cores.
TEST_ENV = {
    "SLUICE_SPARK_MASTER": "local[2]",
    "SLUICE_SPARK_CONF": json.dumps(
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    ),
    "SLUICE_TRIGGER_INTERVAL": "500 milliseconds",
    "SLUICE_RESTART_ATTEMPTS": "2",
    "SLUICE_RESTART_BACKOFF_SECONDS": "0.2",
    "SLUICE_STATS_FLUSH_SECONDS": "1",
    "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1",
    # The run's class-data archive, also for a test that gives the service another HOME.
    "SLUICE_JVM_ARCHIVE_DIR": str(class_archive.archive_dir()),
}


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def poll(
    condition: Callable[[], T | None], *, timeout: float, message: str, every: float = 0.25
) -> T:
    """Return the first truthy value of `condition()`, or fail with `message` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"{message} (after {timeout:g} s; last value {last!r})")


def clean_env() -> dict[str, str]:
    """This environment without any Sluice setting the developer may have exported."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}


class ServiceProcess:
    """One `sluice serve` process (see the module docstring)."""

    def __init__(self, data_dir: Path, *, extra_env: dict[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = data_dir.parent / f"service-{self.port}.log"
        self.extra_env = extra_env or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """The service's environment."""
        return {
            **clean_env(),
            **TEST_ENV,
            "SLUICE_DATA_DIR": str(self.data_dir),
            "SLUICE_PORT": str(self.port),
            "SLUICE_HOST": "127.0.0.1",
            **self.extra_env,
        }

    def start(self, *, timeout: float = 180.0, until: str = "ready") -> ServiceProcess:
        """Start and wait until Spark is ready (or reports the `until` engine state)."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child process
        self.proc = subprocess.Popen(
            [*SLUICE, "serve", "--log-level", "warning"],
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        poll(
            lambda: self._ready(until),
            timeout=timeout,
            message=f"the service's engine did not become {until}:\n{self.log_tail()}",
        )
        return self

    def _ready(self, until: str = "ready") -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(
                f"the service exited with {self.proc.returncode}:\n{self.log_tail()}"
            )
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).json().get("engine") == until
        except (httpx.HTTPError, ValueError):
            return False

    def log_tail(self, lines: int = 40) -> str:
        """The end of the service log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    @property
    def api_key(self) -> str:
        """The key the service generated in its data directory."""
        return (self.data_dir / "api_key").read_text().strip()

    def http(self, *, key: str | None = None) -> httpx.Client:
        """An HTTP client (with the service's key unless another is given)."""
        token = self.api_key if key is None else key
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
        )

    def cli(
        self, *args: str, stdin: str | None = None, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        """Run the real `sluice` command against this service (key found via the data dir)."""
        env = {**clean_env(), "SLUICE_URL": self.url, "SLUICE_DATA_DIR": str(self.data_dir)}
        return subprocess.run(
            [*SLUICE, *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=env
        )

    def stop(self, *, timeout: float = 120.0) -> int:
        """SIGTERM, then wait for a clean exit; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill9(self) -> None:
        """SIGKILL the service process only (its JVM must notice on its own)."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(timeout=30)

    def cleanup(self) -> None:
        """Make sure nothing this object started is left running (test teardown)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.stop(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def jvm_pid(data_dir: Path, processor_id: str) -> int:
    """The JVM recorded in a running processor's checkpoint lock file."""
    record = json.loads(
        (data_dir / "checkpoints" / processor_id / "driver.lock").read_text() or "{}"
    )
    return int(record.get("jvmPid", 0))


def alive(pid: int) -> bool:
    """Whether a process runs (zombies count as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
