"""Latency of the control endpoints under concurrent load, with processors running.

Starts the real service (`sluice serve`, Spark inside) on a free loopback port with a
temporary data directory, creates and starts `--processors` processors on HttpIngest
connections, keeps a trickle of records flowing into them, and then measures:

* reads (`GET` processors list / one processor / stats / sample / DLQ, `/metrics`,
  `/healthz`): `--requests` requests from `--concurrency` threads, round-robin;
* definitions (`POST` create, `PATCH` modify, `DELETE` drop of a processor that is not
  started; create and modify compile the pipeline on Spark): `--definition-rounds` rounds;
* lifecycle (`:stop` then `:start` of a running processor; start launches a Spark query):
  `--lifecycle-rounds` rounds.

Prints p50/p99/mean/max per endpoint (milliseconds) as a table and, with `--json`, as JSON.
Loopback only; the request count is bounded.

    python benchmarks/api_latency.py --requests 2000 --concurrency 8 --processors 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

SLUICE = (
    [shutil.which("sluice")]
    if shutil.which("sluice")
    else [sys.executable, "-m", "service.cli.app"]
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_service(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    env.update(
        {
            "SLUICE_DATA_DIR": str(data_dir),
            "SLUICE_PORT": str(port),
            "SLUICE_SPARK_MASTER": "local[2]",
            "SLUICE_SPARK_CONF": json.dumps({"spark.sql.shuffle.partitions": "2"}),
            "SLUICE_TRIGGER_INTERVAL": "1 second",
        }
    )
    log = open(data_dir.parent / "service.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [*SLUICE, "serve", "--log-level", "warning"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(
                f"the service exited ({proc.returncode}); see {data_dir.parent / 'service.log'}"
            )
        try:
            if httpx.get(f"{url}/healthz", timeout=2).json().get("engine") == "ready":
                return proc, url
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit("the service did not become ready in 240 s")


def pipeline(connection: str) -> list[dict[str, Any]]:
    return [
        {"$source": {"connectionName": connection}},
        {"$match": {"v": {"$gte": 0}}},
        {"$addFields": {"ratio": {"$divide": ["$v", "$d"]}}},
    ]


def timed(samples: dict[str, list[float]], label: str, call: Callable[[], httpx.Response]) -> None:
    begin = time.perf_counter()
    response = call()
    elapsed = (time.perf_counter() - begin) * 1000
    if response.status_code >= 500:
        raise SystemExit(f"{label}: server error {response.status_code}: {response.text[:300]}")
    samples[label].append(elapsed)


def feeder(
    url: str, headers: dict[str, str], connections: list[str], stop: threading.Event
) -> None:
    """A trickle of records (one in ten divides by zero: DLQ) into every connection."""
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        n = 0
        while not stop.wait(0.2):
            for connection in connections:
                docs = [{"v": n + i, "d": 0 if (n + i) % 10 == 0 else 2} for i in range(20)]
                try:
                    client.post(f"/api/v1/ingest/{connection}", json=docs)
                except httpx.HTTPError:
                    return  # the service is shutting down
            n += 20


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="sluice-bench-"))
    data_dir = root / "data"
    proc, url = start_service(data_dir)
    headers = {"Authorization": f"Bearer {(data_dir / 'api_key').read_text().strip()}"}
    stop = threading.Event()
    samples: dict[str, list[float]] = defaultdict(list)
    try:
        client = httpx.Client(base_url=url, headers=headers, timeout=300)
        names, connections = [], []
        dlq = {"connectionName": "local", "db": "bench", "coll": "dlq"}
        for i in range(args.processors):
            connection, name = f"in{i}", f"p{i}"
            client.post(
                "/api/v1/connections", json={"name": connection, "type": "HttpIngest"}
            ).raise_for_status()
            client.post(
                "/api/v1/processors",
                json={"name": name, "pipeline": pipeline(connection), "options": {"dlq": dlq}},
            ).raise_for_status()
            client.post(f"/api/v1/processors/{name}:start").raise_for_status()
            names.append(name)
            connections.append(connection)
        threading.Thread(target=feeder, args=(url, headers, connections, stop), daemon=True).start()
        time.sleep(args.warmup)

        reads: list[tuple[str, str]] = []
        for name in names:
            reads += [
                ("GET /processors", "/api/v1/processors"),
                ("GET /processors/{name}", f"/api/v1/processors/{name}"),
                ("GET /processors/{name}/stats", f"/api/v1/processors/{name}/stats"),
                ("GET /processors/{name}/sample", f"/api/v1/processors/{name}/sample?limit=20"),
                ("GET /processors/{name}/dlq", f"/api/v1/processors/{name}/dlq?limit=20"),
                ("GET /metrics", "/metrics"),
                ("GET /healthz", "/healthz"),
            ]
        local = threading.local()

        def one(index: int) -> None:
            if not hasattr(local, "client"):
                local.client = httpx.Client(base_url=url, headers=headers, timeout=120)
            label, path = reads[index % len(reads)]
            timed(samples, label, lambda: local.client.get(path))

        begin = time.perf_counter()
        with ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(one, range(args.requests)))
        read_seconds = time.perf_counter() - begin

        for i in range(args.definition_rounds):
            name = f"def{i}"
            body = {"name": name, "pipeline": pipeline("in0"), "options": {"dlq": dlq}}
            timed(
                samples,
                "POST /processors",
                lambda b=body: client.post("/api/v1/processors", json=b),
            )
            change = {"pipeline": [*pipeline("in0"), {"$project": {"_id": 0}}]}
            timed(
                samples,
                "PATCH /processors/{name}",
                lambda n=name, c=change: client.patch(f"/api/v1/processors/{n}", json=c),
            )
            timed(
                samples,
                "DELETE /processors/{name}",
                lambda n=name: client.delete(f"/api/v1/processors/{n}"),
            )
        for _ in range(args.lifecycle_rounds):
            timed(
                samples,
                "POST /processors/{name}:stop",
                lambda: client.post(f"/api/v1/processors/{names[0]}:stop"),
            )
            timed(
                samples,
                "POST /processors/{name}:start",
                lambda: client.post(f"/api/v1/processors/{names[0]}:start"),
            )
        stats = client.get(f"/api/v1/processors/{names[-1]}/stats").json()
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)
    return summarize(samples, args, read_seconds, stats)


def summarize(
    samples: dict[str, list[float]],
    args: argparse.Namespace,
    read_seconds: float,
    stats: dict[str, Any],
) -> dict[str, Any]:
    rows = {}
    for label, values in samples.items():
        ordered = sorted(values)
        rows[label] = {
            "count": len(ordered),
            "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
            "mean_ms": round(statistics.fmean(ordered), 2),
            "max_ms": round(ordered[-1], 2),
        }
    read_count = sum(len(v) for k, v in samples.items() if k.startswith("GET"))
    return {
        "config": vars(args),
        "reads_per_second": round(read_count / read_seconds, 1),
        "endpoints": rows,
        "last_processor_stats": {
            k: stats.get(k) for k in ("inputMessageCount", "outputMessageCount", "dlqMessageCount")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="read requests in total")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--processors", type=int, default=3, help="running processors")
    parser.add_argument("--definition-rounds", type=int, default=5)
    parser.add_argument("--lifecycle-rounds", type=int, default=3)
    parser.add_argument(
        "--warmup", type=float, default=20.0, help="seconds of load before measuring"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{'endpoint':34} {'n':>5} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9} {'max ms':>9}")
    for label, row in result["endpoints"].items():
        print(
            f"{label:34} {row['count']:>5} {row['p50_ms']:>9} {row['p99_ms']:>9} {row['mean_ms']:>9} {row['max_ms']:>9}"
        )
    print(
        f"reads/s: {result['reads_per_second']}  processors: {args.processors}  stats: {result['last_processor_stats']}"
    )


if __name__ == "__main__":
    main()
