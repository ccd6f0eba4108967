"""A Spark standalone cluster on this machine, for `sluice cluster up|down|status` and tests.

One master and N workers on 127.0.0.1, started from the installed pyspark package (which
carries Spark's jars and `bin/spark-class`; it serves as `SPARK_HOME`). Each daemon runs in
its own process group, so stopping a worker also stops the executors it launched. PIDs and
ports are recorded in `<data dir>/cluster/state.json`; `up` returns once the master's JSON
status (`http://127.0.0.1:<webui>/json/`) reports every worker ALIVE, or fails with the end
of the daemon logs. Point the service at it with `SLUICE_SPARK_MASTER=<master url>`.

This is a development and test cluster: every node shares this machine's disk, so
`SLUICE_SHARED_STORAGE=true` is accurate for it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(RuntimeError):
    """The cluster could not be started, found or stopped."""


@dataclass
class Daemon:
    """One master or worker process."""

    role: str
    pid: int
    webui_port: int
    log: str


@dataclass
class ClusterState:
    """What `state.json` records."""

    master_url: str
    master_webui_port: int
    cores: int
    memory: str
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def workers(self) -> list[Daemon]:
        """The worker daemons, in start order."""
        return [d for d in self.daemons if d.role.startswith("worker")]

    @property
    def status_url(self) -> str:
        """The master's JSON status page."""
        return f"http://{HOST}:{self.master_webui_port}/json/"


def spark_home() -> Path:
    """The installed pyspark package directory (Spark's jars and launch scripts)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists():
        raise ClusterError(f"{home}/bin/spark-class not found: is pyspark fully installed?")
    return home


def free_port() -> int:
    """A free loopback port (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def is_spark_daemon(pid: int) -> bool:
    """Whether `pid` is a live Spark standalone daemon (not a reused PID, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # An empty command line is a process in the middle of `exec` (spark-class execs java).
    return stat[0] not in ("Z", "X") and (not cmdline or b"org.apache.spark.deploy." in cmdline)


class LocalCluster:
    """A standalone cluster whose state lives in `directory` (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.state_file = directory / "state.json"

    # ------------------------------------------------------------------ state

    def read_state(self) -> ClusterState | None:
        """The recorded cluster, or None."""
        try:
            raw = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        daemons = [Daemon(**d) for d in raw.pop("daemons", [])]
        return ClusterState(**raw, daemons=daemons)

    def _write_state(self, state: ClusterState) -> None:
        temporary = self.state_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(state), indent=2))
        os.replace(temporary, self.state_file)

    def master_status(self, state: ClusterState, *, timeout: float = 2.0) -> dict[str, Any] | None:
        """The master's JSON status, or None when it does not answer."""
        try:
            response = httpx.get(state.status_url, timeout=timeout)
            return dict(response.json()) if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            return None

    # ------------------------------------------------------------------ up

    def _spawn(self, role: str, args: list[str], env: dict[str, str], webui_port: int) -> Daemon:
        log_path = self.directory / "logs" / f"{role}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own group: stopping it stops its executors
            )
        return Daemon(role, proc.pid, webui_port, str(log_path))

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_LOCAL_IP": HOST,
                # Executors start Python workers with the interpreter Sluice runs on.
                "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable),
            }
        )
        # The daemons only schedule; Spark's 1 GiB default heap each is wasted here.
        env.setdefault("SPARK_DAEMON_MEMORY", "256m")
        env.update(extra or {})
        return env

    def up(
        self,
        *,
        workers: int,
        cores: int = 1,
        memory: str = "1g",
        timeout: float = 120.0,
        env: dict[str, str] | None = None,
    ) -> ClusterState:
        """Start a master and `workers` workers; wait until all are ALIVE.

        Raises:
            ClusterError: When a cluster is already recorded and running, or the daemons
                do not come up within `timeout` seconds (they are stopped again).
        """
        if workers < 1 or cores < 1:
            raise ClusterError("--workers and --cores must be at least 1")
        running = self.read_state()
        if running is not None and any(is_spark_daemon(d.pid) for d in running.daemons):
            raise ClusterError(f"a cluster is already running at {running.master_url}")
        self.directory.mkdir(parents=True, exist_ok=True)
        environment = self._env(env)
        port, webui = free_port(), free_port()
        state = ClusterState(f"spark://{HOST}:{port}", webui, cores, memory)
        master_args = [MASTER_CLASS, "--host", HOST, "--port", str(port)]
        state.daemons.append(
            self._spawn("master", [*master_args, "--webui-port", str(webui)], environment, webui)
        )
        self._write_state(state)
        try:
            self._wait(state, 0, timeout)
            for index in range(1, workers + 1):
                self._start_worker(state, index, environment)
            self._write_state(state)
            self._wait(state, workers, timeout)
        except BaseException:
            self.down()
            raise
        return state

    def _start_worker(self, state: ClusterState, index: int, env: dict[str, str]) -> None:
        webui = free_port()
        work_dir = self.directory / f"work-{index}"
        args = [
            WORKER_CLASS, state.master_url, "--cores", str(state.cores),
            "--memory", state.memory, "--host", HOST, "--port", str(free_port()),
            "--webui-port", str(webui), "--work-dir", str(work_dir),
        ]  # fmt: skip
        state.daemons.append(self._spawn(f"worker-{index}", args, env, webui))

    def _wait(self, state: ClusterState, alive_workers: int, timeout: float) -> None:
        """Poll the master until it reports `alive_workers` ALIVE workers (bounded)."""
        deadline = time.monotonic() + timeout
        status: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            dead = [d.role for d in state.daemons if not is_spark_daemon(d.pid)]
            if dead:
                raise ClusterError(f"{', '.join(dead)} exited:\n{self.log_tails(state)}")
            status = self.master_status(state)
            if status is not None and alive_count(status) >= alive_workers:
                return
            time.sleep(0.25)
        seen = "no answer" if status is None else f"{alive_count(status)} ALIVE worker(s)"
        msg = (
            f"the master did not report {alive_workers} ALIVE worker(s) within {timeout:g} s "
            f"({seen} at {state.status_url}):\n{self.log_tails(state)}"
        )
        raise ClusterError(msg)

    def log_tails(self, state: ClusterState, lines: int = 8) -> str:
        """The end of every daemon's log (for error messages)."""
        parts = []
        for daemon in state.daemons:
            try:
                text = Path(daemon.log).read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                text = ["(no log)"]
            parts.append(f"--- {daemon.role} ({daemon.log})\n" + "\n".join(text))
        return "\n".join(parts)

    # ------------------------------------------------------------------ down / status

    def down(self, *, timeout: float = 30.0) -> list[str]:
        """Stop every recorded daemon (workers first) and wait for them; returns their roles."""
        state = self.read_state()
        if state is None:
            return []
        stopped = []
        for daemon in sorted(state.daemons, key=lambda d: d.role == "master"):
            if stop_group(daemon.pid, timeout=timeout):
                stopped.append(daemon.role)
        self.state_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> dict[str, Any]:
        """The recorded cluster, which daemons run, and the master's view of its workers."""
        state = self.read_state()
        if state is None:
            return {"running": False}
        master = self.master_status(state)
        workers = [] if master is None else master.get("workers", [])
        return {
            "running": master is not None,
            "masterUrl": state.master_url,
            "masterWebUi": f"http://{HOST}:{state.master_webui_port}",
            "aliveWorkers": 0 if master is None else alive_count(master),
            "daemons": [{**asdict(d), "running": is_spark_daemon(d.pid)} for d in state.daemons],
            "workers": [
                {"id": w.get("id"), "state": w.get("state"), "cores": w.get("cores")}
                for w in workers
            ],
        }


def alive_count(status: dict[str, Any]) -> int:
    """ALIVE workers in a master status (dead ones stay listed for a while)."""
    return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")


def stop_group(pid: int, *, timeout: float) -> bool:
    """SIGTERM a daemon's process group, SIGKILL it after `timeout`; False if not running."""
    if not is_spark_daemon(pid):
        return False
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not is_spark_daemon(pid):
                _reap(pid)
                return True
            time.sleep(0.1)
    return not is_spark_daemon(pid)


def _reap(pid: int) -> None:
    """Collect the exit status when the daemon is our child (no zombie left behind)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
