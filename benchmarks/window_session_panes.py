"""What count-based panes (issue 25) cost session windows in the window operator, against the
same session window without `trigger`, in one process.

Drives the operator function itself (no Spark; the state round-trips through its pickle
between calls, as between micro-batches) over one partition whose documents are 10 ms apart
with a 3 s gap, so that every document extends one open session (the worst case for a
session's panes: each document makes a new window that takes over the old one's content), in
two calls. Pipelines: no trigger (Atlas), then `early: {count: N}` accumulating for each N in
`--counts`. Prints the seconds per pipeline, the ratio against the one without trigger, and
the results each emitted.

    python benchmarks/window_session_panes.py [--rows 4000] [--counts 1 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_stages._windowing.runtime import config as C  # noqa: E402
from tests.unit.windowing.pane_runs import pane_results  # noqa: E402
from tests.unit.windowing.test_idle_wake import spec  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4000)
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 100])
    args = parser.parse_args()
    n = args.rows
    times = [i * 10 for i in range(n)]
    keys = ["a" if i % 2 else "b" for i in range(n)]
    base = spec(kind="session", hop_ms=3_000, lateness_ms=0, idle_ms=None)
    runs: list[tuple[str, C.PaneSpec | None]] = [("no trigger", None)]
    runs += [
        (f"early count {c}", C.PaneSpec(mode="accumulating", early_count=c)) for c in args.counts
    ]
    pane_results(base, times[:50], keys[:50], [25], partitions=["x"] * 50)  # warm-up
    baseline = None
    for label, panes in runs:
        started = time.perf_counter()
        out = pane_results(replace(base, panes=panes), times, keys, [n // 2], partitions=["x"] * n)
        seconds = time.perf_counter() - started
        baseline = baseline or seconds
        print(f"{label:>16}: {seconds:7.3f} s  x{seconds / baseline:5.2f}  {len(out)} results")


if __name__ == "__main__":
    main()
