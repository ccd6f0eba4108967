"""`sluice process` of the README's window example: through a running service vs `--local`.

Starts the real service (`sluice serve`, Spark inside, the e2e tests' small settings) on a
free loopback port with a temporary data directory, waits until its Spark is ready, then runs
the real CLI `--runs` times each way, alternating (service, local, service, local, ...) so that
both see the same machine load. For each run it prints the wall time of the whole command and
the time to its first output line; at the end the median of each and their ratio.

    python benchmarks/process_service.py --runs 3

Pass `--url` (and `SLUICE_DATA_DIR` for the key) to time a service that is already running.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.service_process import SLUICE, ServiceProcess, clean_env  # noqa: E402


def window_example() -> str:
    """The README's `window.json`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"\(`window\.json`\):\s*```json\n(.*?)```", readme, re.S)
    if found is None:
        raise SystemExit("the README's window example moved")
    return found.group(1)


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall seconds, seconds to the first stdout line, lines printed) of one command."""
    start = time.monotonic()
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    first = None
    lines = 0
    for _ in proc.stdout:
        lines += 1
        if first is None:
            first = time.monotonic() - start
    _, stderr = proc.communicate()
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {proc.returncode}: {stderr}")
    return wall, first if first is not None else wall, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--url", help="A running service (default: start one).")
    options = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
        pipeline = Path(tmp) / "window.json"
        pipeline.write_text(window_example(), encoding="utf-8")
        service = None
        if options.url:
            url, data_dir = options.url, os.environ.get("SLUICE_DATA_DIR", "")
        else:
            started = time.monotonic()
            service = ServiceProcess(Path(tmp) / "data").start(timeout=600)
            print(f"service ready in {time.monotonic() - started:.1f} s")
            url, data_dir = service.url, str(service.data_dir)
        env = {**clean_env(), "SLUICE_URL": url}
        if data_dir:
            env["SLUICE_DATA_DIR"] = data_dir
        results: dict[str, list[tuple[float, float, int]]] = {"service": [], "local": []}
        try:
            for run in range(1, options.runs + 1):
                for mode in ("service", "local"):
                    flags = ["--local"] if mode == "local" else []
                    wall, first, lines = timed([*SLUICE, "process", *flags, str(pipeline)], env)
                    results[mode].append((wall, first, lines))
                    print(
                        f"run {run} {mode:7s}: {wall:6.2f} s total, first line after "
                        f"{first:6.2f} s ({lines} lines)",
                        flush=True,
                    )
        finally:
            if service is not None:
                service.cleanup()
    medians = {
        mode: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
        for mode, rs in results.items()
    }
    for mode, (wall, first) in medians.items():
        print(f"median {mode:7s}: {wall:6.2f} s total, {first:6.2f} s to the first line")
    print(
        f"local / service: {medians['local'][0] / medians['service'][0]:.1f}x total, "
        f"{medians['local'][1] / medians['service'][1]:.1f}x to the first line"
    )
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
