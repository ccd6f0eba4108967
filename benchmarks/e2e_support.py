"""Pieces of `e2e_throughput.py`: input files, the service process, CPU time, profiles.

Nothing here imports Spark or Sluice: the benchmark's parent process only writes files,
starts processes, talks HTTP and reads `/proc`, so the CPU it spends never lands on either
side being measured.
"""

from __future__ import annotations

import collections
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

#: The checkout whose code is measured: the one this file lives in.
REPO = Path(__file__).resolve().parent.parent
#: Event time of the first row (2024-01-01T00:00:00Z), 1 ms further per row.
BASE_MS = 1_704_067_200_000
#: Rows `$match` keeps: `v >= MATCH_MIN` (about 90 % of them).
MATCH_MIN = 10.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Dataset:
    """A directory of JSON-lines files, one micro-batch each, in name and mtime order."""

    directory: Path
    rows: int
    per_file: int
    matched: int  # rows with v >= MATCH_MIN
    late: int  # rows 120 s behind the stream


def line(n: int, ts_ms: int, key: int, v: float, d: int) -> str:
    """One input document (relaxed Extended JSON date, as a source would receive it)."""
    iso = datetime.fromtimestamp(ts_ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return json.dumps(
        {
            "_id": n,
            "seq": n,
            "ts": {"$date": iso.replace("+00:00", "Z")},
            "key": f"k{key}",
            "v": v,
            "d": d,
        },
        separators=(",", ":"),
    )


def write_dataset(directory: Path, *, per_file: int, files: int, keys: int) -> Dataset:
    """`files` files of `per_file` rows: event time 1 ms per row with U(0, 3 s) disorder,
    0.1 % of the rows 120 s late (late for every window: the DLQ's share), `d` never 0
    (Spark's ANSI mode would fail native's query on a division by zero)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    matched = late = n = 0
    for index in range(files):
        lines = []
        for _ in range(per_file):
            ts = BASE_MS + n - rng.randrange(3000)
            if rng.random() < 0.001:
                ts -= 120_000
                late += 1
            v = round(rng.random() * 100, 2)
            matched += v >= MATCH_MIN
            lines.append(line(n, ts, rng.randrange(keys), v, rng.choice((1, 2, 4))))
            n += 1
        target = directory / f"part-{index:05d}.jsonl"
        tmp = directory / f".part-{index:05d}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.rename(target)
        time.sleep(0.02)  # distinct modification times: Spark's file source orders by them
    return Dataset(directory, n, per_file, matched, late)


def count_lines(directory: Path, seen: dict[str, int]) -> int:
    """Lines in the visible files under `directory` (both sides' file sinks rename or commit
    whole files); `seen` caches the files already counted."""
    total = 0
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in names:
            if name.startswith((".", "_")) or name.endswith((".crc", ".tmp")):
                continue
            path = os.path.join(root, name)
            if path not in seen:
                with open(path, "rb") as fh:
                    seen[path] = fh.read().count(b"\n")
            total += seen[path]
    return total


# --------------------------------------------------------------------------- pipelines

STATELESS = [
    {"$match": {"v": {"$gte": MATCH_MIN}}},
    {"$addFields": {"ratio": {"$divide": ["$v", "$d"]}, "high": {"$gt": ["$v", 50]}}},
    {"$project": {"key": 1, "v": 1, "ratio": 1, "high": 1}},
]


def window_stages(pipeline: str) -> list[dict[str, Any]]:
    """The window and the projection that gives each (window, key) its own document."""
    lateness = {"size": 3, "unit": "second"}
    interval = {"size": 10, "unit": "second"}
    if pipeline == "tumbling":
        group = {"_id": "$key", "n": {"$count": {}}, "sum": {"$sum": "$v"}, "avg": {"$avg": "$v"}}
        window = {
            "$tumblingWindow": {
                "interval": interval,
                "allowedLateness": lateness,
                "pipeline": [{"$group": group}],
            }
        }
        fields = {"n": 1, "sum": 1, "avg": 1}
    else:
        group = {
            "_id": "$key",
            "push": {"$push": "$v"},
            "top": {"$top": {"sortBy": {"v": -1}, "output": "$seq"}},
        }
        window = {
            "$hoppingWindow": {
                "interval": interval,
                "hopSize": {"size": 5, "unit": "second"},
                "allowedLateness": lateness,
                "pipeline": [{"$group": group}],
            }
        }
        fields = {"push": 1, "top": 1}
    start = {"$meta": "stream.window.start"}
    return [window, {"$project": {"_id": 0, "key": "$_id", "start": start, **fields}}]


#: A window pipeline read from an HttpIngest connection's spool instead of the files:
#: `ingest-tumbling`, `ingest-hopping` (native reads the files, as for `tumbling`/`hopping`).
INGEST_PREFIX = "ingest-"


def sluice_pipeline(
    pipeline: str, *, source: str, name: str, per_batch: int
) -> list[dict[str, Any]]:
    """Processor `name`'s pipeline (see `e2e_throughput.py`): files under `out/<name>`, or
    the collection `bench.<name>` of `local`."""
    out = f"out/{name}"
    config: dict[str, Any] = {"maxOffsetsPerTrigger": per_batch}
    head: dict[str, Any] = {"connectionName": "files", "path": source, "config": config}
    merge = {"$merge": {"into": {"connectionName": "local", "db": "bench", "coll": name}}}
    if pipeline.startswith(INGEST_PREFIX):  # the HttpIngest connection `name`, from its start
        config["auto_offset_reset"] = "earliest"
        head = {"connectionName": name, "config": config}
        pipeline = pipeline.removeprefix(INGEST_PREFIX)
    if pipeline == "emit":
        return [{"$source": head}, *STATELESS, {"$emit": {"connectionName": "files", "path": out}}]
    if pipeline == "merge":
        return [{"$source": head}, *STATELESS, merge]
    return [{"$source": {**head, "timeField": "$ts"}}, *window_stages(pipeline), merge]


# --------------------------------------------------------------------------- the service


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    """`sluice serve` of this checkout, default settings, on a free loopback port with its
    own data directory (`extra_env` overrides settings, e.g. `SLUICE_TRIGGER_INTERVAL`)."""

    def __init__(self, root: Path, extra_env: dict[str, str]) -> None:
        self.data_dir = root / "data"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = root / "service.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
        env.update(
            {
                "PYTHONPATH": str(REPO),
                "SLUICE_DATA_DIR": str(self.data_dir),
                "SLUICE_PORT": str(self.port),
                "SLUICE_HOST": "127.0.0.1",
                **extra_env,
            }
        )
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "service.cli.app", "serve", "--log-level", "warning"],
                env=env,
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready()
        key = (self.data_dir / "api_key").read_text().strip()
        self.http = httpx.Client(
            base_url=f"{self.url}/api/v1", headers={"Authorization": f"Bearer {key}"}, timeout=600
        )

    def _wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the service exited; see {self.log_path}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).json().get("engine") == "ready":
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5)
        raise SystemExit(f"the service was not ready in {timeout:g} s; see {self.log_path}")

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One API call; any error status stops the benchmark with the service's answer."""
        response = self.http.request(method, path, **kwargs)
        if response.status_code >= 400:
            raise SystemExit(f"{method} {path}: {response.status_code} {response.text[:2000]}")
        return response.json() if response.content else None

    def stats(self, name: str, *, verbose: bool = False) -> dict[str, Any]:
        """The processor's stats."""
        return dict(self.call("GET", f"/processors/{name}/stats", params={"verbose": verbose}))

    def create(self, name: str, pipeline: list[dict[str, Any]], dlq: bool) -> None:
        """Create a processor (DLQ into `local` when `dlq`)."""
        options = {"dlq": {"connectionName": "local", "db": "bench", "coll": "dlq"}} if dlq else {}
        self.call(
            "POST", "/processors", json={"name": name, "pipeline": pipeline, "options": options}
        )

    def drop(self, name: str) -> None:
        """Stop and delete a processor (its checkpoint and state go with it)."""
        self.call("DELETE", f"/processors/{name}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL for the whole process group if it does not exit."""
        self.http.close()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def wait_for(
    condition: Callable[[], bool], *, timeout: float, what: str, every: float = 0.1
) -> float:
    """Poll until `condition()`; the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")


# --------------------------------------------------------------------------- CPU time


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU s, reaped children's CPU s) of a process, from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    own = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    children = (int(fields[13]) + int(fields[14])) / CLOCK_TICKS
    return int(fields[1]), own, children


@dataclass(frozen=True)
class Cpu:
    """CPU seconds of a process (its own threads) and of everything below it (the JVM, the
    Python workers and data-source runners it starts; reaped children included)."""

    python: float
    below: float

    def __sub__(self, other: Cpu) -> Cpu:
        return Cpu(self.python - other.python, self.below - other.below)

    @property
    def total(self) -> float:
        """The process's and everything below it."""
        return self.python + self.below


def _process_table() -> tuple[dict[int, tuple[int, float, float]], dict[int, list[int]]]:
    """Every process's `_stat`, and each one's children."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            stats[int(entry)] = stat
    children: dict[int, list[int]] = collections.defaultdict(list)
    for pid, (ppid, _, _) in stats.items():
        children[ppid].append(pid)
    return stats, children


def _below(
    root: int, stats: dict[int, tuple[int, float, float]], children: dict[int, list[int]]
) -> float:
    """CPU seconds of everything below `root` (descendants, reaped children included)."""
    below, todo = stats[root][2], list(children[root])
    while todo:
        pid = todo.pop()
        below += stats[pid][1] + stats[pid][2]
        todo += children[pid]
    return below


def tree_cpu(root: int) -> Cpu:
    """`Cpu` of `root` and its descendants now."""
    stats, children = _process_table()
    if root not in stats:
        return Cpu(0.0, 0.0)
    return Cpu(stats[root][1], _below(root, stats, children))


#: What a standalone cluster's executor process runs (`sluice cluster up`'s workers start it).
EXECUTOR_MAIN = "CoarseGrainedExecutorBackend"


def executors_cpu() -> float:
    """CPU seconds of every Spark executor on this machine and everything below it (its
    Python workers); 0 without a cluster. An executor lives as long as its application (the
    service), so the difference of two readings is what its executors spent in between."""
    stats, children = _process_table()
    total = 0.0
    for pid in stats:
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if EXECUTOR_MAIN.encode() in command:
            total += stats[pid][1] + _below(pid, stats, children)
    return total


# --------------------------------------------------------------------------- profiles


def start_profile(
    pid: int, seconds: float, out: Path, *, workers: bool = False
) -> subprocess.Popen[bytes] | None:
    """A sampling profile of the service's Python (py-spy, collapsed stacks), or None when
    py-spy is not installed (`pip install py-spy`). With `workers`, the Python processes
    below it too (Spark's Python workers and data source runners, under the JVM)."""
    exe = shutil.which("py-spy")
    if exe is None:
        print("  (no py-spy on PATH: no profile)")
        return None
    return subprocess.Popen(
        [exe, "record", "-p", str(pid), "-d", str(int(seconds)), "-r", "100", "-f", "raw",
         "-o", str(out), "--nonblocking", "--nolineno", *(["--subprocesses"] if workers else [])],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def top_frames(collapsed: Path, limit: int = 20) -> list[tuple[str, float, float]]:
    """`(function, inclusive %, self %)` of the busiest functions in a collapsed-stack file
    (`frame;frame;... count` per line), by inclusive share of all samples; the frames at
    the root of every thread (`_GENERIC`) are left out of the list."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for raw in collapsed.read_text(errors="replace").splitlines():
        stack, _, count_text = raw.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_short(f) for f in stack.split(";") if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        own[frames[-1]] += count
        for frame in set(frames):
            if not any(g in frame for g in _GENERIC):
                inclusive[frame] += count
    if total == 0:
        return []
    return [
        (frame, 100 * n / total, 100 * own[frame] / total)
        for frame, n in inclusive.most_common(limit)
    ]


#: Frames every thread of the service has at its root (threads, the event loop, the CLI).
_GENERIC = ("(threading.py)", "(asyncio/", "(uvicorn/", "(typer/", "(anyio/", "(<frozen runpy>)",
            "(socketserver.py)", "(selectors.py)")  # fmt: skip


def _short(frame: str) -> str:
    """`function (path/under/repo.py:line)` with site-packages and the repo root cut."""
    for cut in (f"{REPO}/", "site-packages/"):
        if cut in frame:
            head, _, tail = frame.partition("(")
            return f"{head}({tail.split(cut, 1)[-1]}"
    return frame
