"""Spark's cold start with and without the JVM class-data archive, as Sluice starts it.

Each run is a new Python process that calls `build_session` (Sluice's settings, local[2])
and runs one small query; the wall time from process start to the query's result is what a
user waits for before `sluice serve` is ready or `sluice process` shows a result. Runs
alternate between `SLUICE_JVM_ARCHIVE=off` and on (the archive is built first if needed), so
machine noise hits both; prints min/median/max per mode and the ratio of medians.

    PYTHONPATH=$PWD python3 benchmarks/spark_start.py [--runs 5] [--c1]

`--c1` starts the JVMs as the test suite does (`-XX:TieredStopAtLevel=1`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from pipeline_stages._engine import class_archive

ONE_START = (
    "from pipeline_stages._engine.session import build_session;"
    "build_session(master='local[2]').range(10).selectExpr('sum(id)').collect()"
)


def one_start(mode: str, c1: bool) -> float:
    env = {**os.environ, "SLUICE_JVM_ARCHIVE": mode}
    if c1:
        env["JAVA_TOOL_OPTIONS"] = "-XX:TieredStopAtLevel=1"
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", ONE_START],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--c1", action="store_true", help="C1-only JIT, as in the tests")
    args = parser.parse_args()
    path = class_archive.archive_path()
    if path is None or not class_archive.build(path, wait=True):
        raise SystemExit("could not build the class archive (is java on PATH?)")
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.runs):
        for mode in times:
            times[mode].append(one_start(mode, args.c1))
    for mode, seconds in times.items():
        print(
            f"archive {mode:3}: min {min(seconds):5.1f} s  median {statistics.median(seconds):5.1f}"
            f" s  max {max(seconds):5.1f} s  ({len(seconds)} runs)"
        )
    ratio = statistics.median(times["on"]) / statistics.median(times["off"])
    print(f"with / without the archive (medians): {ratio:.2f}x")


if __name__ == "__main__":
    main()
