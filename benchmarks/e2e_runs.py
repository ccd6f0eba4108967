"""The measured runs of `e2e_throughput.py`: the service and the native process side by side.

`Bench` owns both processes (the service of this checkout and `e2e_native.py`) and the
files they read, and runs one pipeline once on one side, returning rows per second and the
CPU seconds its process tree spent (see `e2e_throughput.py` for what each pipeline is).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import e2e_support as S
import httpx

NATIVE = Path(__file__).resolve().parent / "e2e_native.py"

# --------------------------------------------------------------------------- one run


@dataclass
class Run:
    """One measured run of one side."""

    rows_per_s: float
    cpu: S.Cpu
    detail: dict[str, Any] = field(default_factory=dict)


def driver_share(driver: S.Cpu, executors: float) -> float | None:
    """The driver's CPU (its whole process tree) over the executors' (None: they spent none)."""
    return round(driver.total / executors, 3) if executors > 0 else None


class Bench:
    """The service, the native process and the files both read."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = Path(tempfile.mkdtemp(prefix="sluice-e2e-"))
        self.files = self.root / "files"
        self.files.mkdir()
        self.counter = 0
        extra = dict(kv.split("=", 1) for kv in args.service_env)
        # Which side runs on a standalone cluster: only its executors are this machine's.
        self.service_on_cluster = extra.get("SLUICE_SPARK_MASTER", "").startswith("spark://")
        self.native_on_cluster = args.master.startswith("spark://")
        print(f"starting the service and the native process (work dir {self.root})", flush=True)
        self.service = S.Service(self.root, extra)
        self.service.call(
            "POST",
            "/connections",
            json={"name": "files", "type": "File", "directory": str(self.files)},
        )
        self.native = subprocess.Popen(
            [sys.executable, str(NATIVE), args.master, str(args.partitions)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.root / "native.log", "ab"),  # noqa: SIM115 - the child's
            text=True,
        )
        self.ask_native({"op": "ping"}, wait_only=True)

    def close(self) -> None:
        """Stop both processes and remove the work directory (`--keep` keeps it)."""
        try:
            self.ask_native({"op": "exit"}, answer=False)
            self.native.wait(timeout=120)
        finally:
            self.service.stop()
            if not self.args.keep:
                shutil.rmtree(self.root, ignore_errors=True)

    def ask_native(
        self, cmd: dict[str, Any], *, answer: bool = True, wait_only: bool = False
    ) -> dict[str, Any]:
        """Send one command to the native process and read its `RESULT` line."""
        assert self.native.stdin is not None and self.native.stdout is not None
        if not wait_only:
            self.native.stdin.write(json.dumps(cmd) + "\n")
            self.native.stdin.flush()
        if not answer:
            return {}
        for raw in self.native.stdout:
            if raw.startswith("RESULT "):
                result = dict(json.loads(raw[7:]))
                if "error" in result:
                    raise SystemExit(f"native: {result['error']}")
                return result
        raise SystemExit(f"the native process exited; see {self.root / 'native.log'}")

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    # ----------------------------------------------------------------- throughput

    def sluice_run(self, pipeline: str, data: S.Dataset, *, profile: float = 0) -> Run:
        """Create, start, wait until every row is in the sink, drop. With `profile`, py-spy
        samples the service's Python for that many seconds from the first batch on (the
        start's compile is not what a running processor spends its time on)."""
        name = self.name(pipeline)
        out = f"out/{name}"
        source = str(data.directory.relative_to(self.files))
        spooled = pipeline.startswith(S.INGEST_PREFIX)
        accepted_per_s = None
        if spooled:  # every row is in the connection's spool before the processor starts
            self.service.call("POST", "/connections", json={"name": name, "type": "HttpIngest"})
            # One thread: the spool holds the rows in the files' order, so lateness and the
            # DLQ are the File run's.
            accepted, seconds = self.post_all(name, data, concurrency=1)
            assert accepted == data.rows, (accepted, data.rows)
            accepted_per_s = round(accepted / seconds)
        body = S.sluice_pipeline(pipeline, source=source, name=name, per_batch=data.per_file)
        self.service.create(name, body, dlq=True)
        seen: dict[str, int] = {}
        first: list[float] = []
        #: The driver's and the executors' CPU when the first batch's output appeared.
        at_first: list[tuple[S.Cpu, float]] = []
        spy: list[Any] = []

        def done() -> bool:
            if pipeline == "emit":
                count, target = S.count_lines(self.files / out, seen), data.matched
            else:
                stats = self.service.stats(name)
                count, target = int(stats["inputMessageCount"]), data.rows
                if pipeline == "merge":
                    count, target = int(stats["outputMessageCount"]), data.matched
            if count and not first:
                first.extend((time.monotonic(), count / target))
                if self.service_on_cluster:
                    at_first.append((S.tree_cpu(self.service.proc.pid), S.executors_cpu()))
                if profile:
                    path = self.root / f"profile-{name}.txt"
                    spy.append(
                        (
                            S.start_profile(
                                self.service.proc.pid,
                                profile,
                                path,
                                workers=self.args.profile_workers,
                            ),
                            path,
                        )
                    )
            return count >= target

        before = S.tree_cpu(self.service.proc.pid)
        executors_before = S.executors_cpu()
        started = time.monotonic()
        self.service.call("POST", f"/processors/{name}:start")
        finished = S.wait_for(done, timeout=self.args.timeout, what=f"{name} to finish")
        ended, executors_ended = S.tree_cpu(self.service.proc.pid), S.executors_cpu()
        cpu = ended - before
        executors = executors_ended - executors_before
        stats = self.service.stats(name)
        self.service.drop(name)
        if spooled:
            self.service.call("DELETE", f"/connections/{name}")
        for process, path in spy:
            if process is not None:
                process.wait()
                print_profile(path, profile)
        detail = {
            k: stats.get(k) for k in ("inputMessageCount", "outputMessageCount", "dlqMessageCount")
        }
        detail["first_batch_s"] = round(first[0] - started, 1)
        detail["steady_rows_per_s"] = steady(data.rows * (1 - first[1]), finished - first[0])
        if accepted_per_s is not None:
            detail["accepted_per_s"] = accepted_per_s
        # On a cluster: the driver (the service's tree) against the executors.
        share = driver_share(cpu, executors)
        if self.service_on_cluster and share is not None:
            detail["executors_cpu_s"] = round(executors, 1)
            detail["driver_cpu_vs_executors"] = share
            # After the first batch: without the start's compile, the source's planning
            # process starting and most of the first batch's JIT work in both JVMs.
            if at_first:
                driver_then, executors_then = at_first[0]
                after = driver_share(ended - driver_then, executors_ended - executors_then)
                if after is not None:
                    detail["driver_cpu_vs_executors_after_1st"] = after
        return Run(data.rows / (finished - started), cpu, detail)

    def native_run(self, pipeline: str, data: S.Dataset) -> Run:
        """The native query over the same files."""
        before = S.tree_cpu(self.native.pid)
        executors_before = S.executors_cpu()
        out = self.root / "native" / self.name(pipeline)
        result = self.ask_native(
            {
                "op": "run",
                "pipeline": pipeline.removeprefix(S.INGEST_PREFIX),
                "input": str(data.directory),
                "out": str(out),
                "rows": data.rows,
                "trigger": self.args.native_trigger,
            },
        )
        cpu = S.tree_cpu(self.native.pid) - before
        executors = S.executors_cpu() - executors_before
        detail = {
            "batches": len(result["batches"]),
            "first_batch_s": round(result["first"], 1),
            "steady_rows_per_s": steady(
                data.rows - result["first_rows"], result["seconds"] - result["first"]
            ),
        }
        # With `--master spark://...` (and the service on another master): native's driver
        # against its executors, the figure the service's driver share compares with.
        share = driver_share(cpu, executors)
        if self.native_on_cluster and share is not None:
            detail["executors_cpu_s"] = round(executors, 1)
            detail["driver_cpu_vs_executors"] = share
        return Run(data.rows / result["seconds"], cpu, detail)

    # ----------------------------------------------------------------- ingest

    def ingest_run(self, data: S.Dataset) -> Run:
        """HTTP ingest -> `$match` -> File `$emit` (see the module docstring)."""
        name = self.name("ingest")
        self.service.call("POST", "/connections", json={"name": name, "type": "HttpIngest"})
        out = f"out/{name}"
        body = [
            {
                "$source": {
                    "connectionName": name,
                    "config": {
                        "auto_offset_reset": "earliest",
                        "maxOffsetsPerTrigger": data.per_file,
                    },
                }
            },
            S.STATELESS[0],
            {"$emit": {"connectionName": "files", "path": out}},
        ]
        self.service.create(name, body, dlq=True)
        self.service.call("POST", f"/processors/{name}:start")
        before = S.tree_cpu(self.service.proc.pid)
        started = time.monotonic()
        accepted, seconds = self.post_all(name, data, concurrency=self.args.ingest_concurrency)
        ingested = started + seconds
        seen: dict[str, int] = {}
        first: list[float] = []

        def done() -> bool:
            count = S.count_lines(self.files / out, seen)
            if count and not first:
                first.extend((time.monotonic(), count / data.matched))
            return count >= data.matched

        finished = S.wait_for(
            done,
            timeout=self.args.timeout,
            what=f"{name} to finish",
        )
        cpu = S.tree_cpu(self.service.proc.pid) - before
        self.service.drop(name)
        self.service.call("DELETE", f"/connections/{name}")
        detail = {
            "accepted": accepted,
            "accepted_per_s": round(accepted / (ingested - started)),
            "first_batch_s": round(first[0] - started, 1),
            "steady_rows_per_s": steady(data.rows * (1 - first[1]), finished - first[0]),
        }
        return Run(data.rows / (finished - started), cpu, detail)

    def post_all(self, name: str, data: S.Dataset, *, concurrency: int) -> tuple[int, float]:
        """POST every row of `data` to the HttpIngest connection `name` (NDJSON bodies of
        `--ingest-batch` rows from `concurrency` threads); the rows accepted and the seconds
        it took."""
        chunks = []
        for path in sorted(data.directory.glob("*.jsonl")):
            lines = path.read_bytes().splitlines(keepends=True)
            for i in range(0, len(lines), self.args.ingest_batch):
                chunks.append(b"".join(lines[i : i + self.args.ingest_batch]))
        local = threading.local()
        headers = {"Content-Type": "application/x-ndjson"}

        def post(chunk: bytes) -> int:
            if not hasattr(local, "client"):
                local.client = httpx.Client(
                    base_url=self.service.http.base_url,
                    headers=self.service.http.headers,
                    timeout=600,
                )
            response = local.client.post(f"/ingest/{name}", content=chunk, headers=headers)
            response.raise_for_status()
            return int(response.json()["accepted"])

        started = time.monotonic()
        with ThreadPoolExecutor(concurrency) as pool:
            accepted = sum(pool.map(post, chunks))
        return accepted, time.monotonic() - started

    # ----------------------------------------------------------------- latency

    @staticmethod
    def write_live(live: Path, n: int, ts: int) -> None:
        """Record `n` (event time `ts`, key k0) as a new file of the live directory."""
        tmp, final = live / f".r-{n:06d}.tmp", live / f"r-{n:06d}.jsonl"
        tmp.write_text(S.line(n, ts, 0, 50.0, 1) + "\n")
        tmp.rename(final)

    def latency_run(self, side: str) -> dict[str, Any]:
        """p50 latency and the 1-row batches' cost of one side (module docstring)."""
        live = self.files / self.name(f"live-{side}")
        live.mkdir()
        out = self.files / "out" / live.name
        name = live.name
        if side == "sluice":
            group = {"$group": {"_id": "$key", "n": {"$count": {}}}}
            body = [
                {
                    "$source": {
                        "connectionName": "files",
                        "path": str(live.relative_to(self.files)),
                        "timeField": "$ts",
                    }
                },
                {
                    "$tumblingWindow": {
                        "interval": {"size": 2, "unit": "second"},
                        "allowedLateness": 0,
                        "pipeline": [group],
                    }
                },
                {
                    "$project": {
                        "_id": 0,
                        "key": "$_id",
                        "n": 1,
                        "start": {"$meta": "stream.window.start"},
                    }
                },
                {"$emit": {"connectionName": "files", "path": str(out.relative_to(self.files))}},
            ]
            self.service.create(name, body, dlq=True)
            self.service.call("POST", f"/processors/{name}:start")
        else:
            self.ask_native(
                {
                    "op": "start",
                    "pipeline": "latency",
                    "input": str(live),
                    "out": str(out),
                    "trigger": "1 second",
                }
            )
        first_seen: dict[int, float] = {}
        batches: dict[int, dict[str, Any]] = {}
        stop = threading.Event()

        def consumed() -> int:
            if side == "sluice":
                return int(self.service.stats(name)["inputMessageCount"])
            return int(self.ask_native({"op": "rows"})["rows"])

        # A first record, and nothing timed until the query has read it: starting a query
        # (compiling, the first batch's one-off costs) is not what latency is about.
        self.write_live(live, 0, int(time.time() * 1000))
        S.wait_for(lambda: consumed() >= 1, timeout=self.args.timeout, what=f"{name} to start")

        # Native's checkpoint sits beside its sink: read the sink's files only.
        root = out if side == "sluice" else out / "sink"

        def watch() -> None:
            while not stop.wait(0.02):
                try:
                    paths = list(root.rglob("*"))
                except FileNotFoundError:
                    continue  # a directory went away mid-walk (the sink's staging): next tick
                for path in paths:
                    # Hidden and underscored names, at any depth, are not published output
                    # (Sluice's sink stages a batch's files in a hidden directory).
                    parts = path.relative_to(root).parts
                    if (
                        path.is_file()
                        and not any(part.startswith((".", "_")) for part in parts)
                        and not path.name.endswith(".crc")
                    ):
                        try:
                            lines = path.read_text(errors="replace").splitlines()
                        except FileNotFoundError:
                            continue  # renamed since the walk: read it next tick
                        for text in lines:
                            try:  # Spark's file sink writes its part files in place
                                start = result_start(json.loads(text))
                            except (ValueError, KeyError):
                                continue  # a line still being written: read it next time
                            first_seen.setdefault(start, time.monotonic())

        def record_batches() -> None:
            # A thread of its own: a stats request must not delay the watcher's timestamps.
            while not stop.wait(0.2):
                last = self.service.stats(name, verbose=True).get("lastBatch") or {}
                if "batchId" in last:
                    batches[int(last["batchId"])] = last

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        recorder = threading.Thread(target=record_batches, daemon=True)
        if side == "sluice":
            recorder.start()
        time.sleep(self.args.latency_gap)
        written: list[tuple[int, float]] = []
        for n in range(1, self.args.latency_records + 1):
            ts = int(time.time() * 1000)
            self.write_live(live, n, ts)
            written.append((ts, time.monotonic()))
            time.sleep(self.args.latency_gap)
        # Every window but the last record's is closed: wait for their results (a loaded
        # machine may take long), then stop.
        last = written[-1][0] // 2000
        closed = len({ts // 2000 for ts, _ in written if ts // 2000 < last})
        S.wait_for(lambda: len(first_seen) >= closed, timeout=600, what=f"{name}'s windows")
        stop.set()
        watcher.join()
        if recorder.is_alive():
            recorder.join()
        if side == "sluice":
            self.service.drop(name)
            one_row = [b for b in batches.values() if b.get("numInputRows") == 1]
            costs = [float(b["durationMs"]) for b in one_row]
            phases = [b.get("phasesMs") or {} for b in one_row]
        else:
            progress = [b for b in self.ask_native({"op": "stop"})["batches"] if b["rows"] == 1]
            costs = [float(b["ms"]) for b in progress]
            phases = [b.get("phases") or {} for b in progress]
        latencies = []
        for start, seen_at in first_seen.items():
            closing = next((at for ts, at in written if ts >= start + 2000), None)
            if closing is not None:
                latencies.append(seen_at - closing)
        return {
            "latency_p50_s": statistics.median(latencies) if latencies else float("nan"),
            "windows": len(latencies),
            "batch_ms_p50": statistics.median(costs) if costs else float("nan"),
            "one_row_batches": len(costs),
            "phases_ms_p50": {
                name: statistics.median(p.get(name, 0) for p in phases)
                for name in sorted({name for p in phases for name in p})
            },
        }


def steady(rows: float, seconds: float) -> float:
    """Rows per second after the first batch (none when the first batch held them all)."""
    return round(rows / seconds) if rows > 0 and seconds > 0 else float("nan")


def result_start(doc: dict[str, Any]) -> int:
    """A window result's start (ms): Sluice's `{"$date": ...}` or native's ISO text."""
    start = doc["start"]
    text = start["$date"] if isinstance(start, dict) else start
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


def print_profile(path: Path, seconds: float) -> None:
    """The busiest functions of the service's Python during the profiled run."""
    if not path.exists():
        print("  (the profiler wrote nothing)")
        return
    print(f"  profile of the service's Python, {seconds:g} s, inclusive % / self % of samples:")
    for frame, inclusive, own in S.top_frames(path, limit=25):
        print(f"    {inclusive:5.1f} % {own:5.1f} %  {frame}")
