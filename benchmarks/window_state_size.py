"""What the window operator's state costs as open groups grow: bytes written per batch, the
time of a batch that touches few groups, and the process's memory.

Drives the operator function itself (no Spark: what `applyInPandasWithState` calls per bucket
and micro-batch, as `window_panes.py` does): a 1-hour tumbling `$group` (`$count` and `$sum`
per key) is filled with `G` open groups (one document per key, in batches of `--fill-batch`),
then `--touch-batches` micro-batches each touch `--touched` of those groups. The operator keeps
a bucket's state as one pickled blob (`runtime.operator`), so every batch rewrites all of it:
what a batch writes is the blob, whatever it touched. Prints, per `G`: the blob's size, the
median time of a touching batch, and the process's peak RSS (which only grows: run one `G`
per process for a clean figure).

    python benchmarks/window_state_size.py [--groups 10000 100000 1000000] [--touched 1000]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_stages._windowing.geometry import WindowGeometry  # noqa: E402
from pipeline_stages._windowing.runtime import config as C  # noqa: E402
from pipeline_stages._windowing.runtime.operator import make_operator  # noqa: E402
from tests.unit.windowing.group_state import FakeState  # noqa: E402
from tests.unit.windowing.operator_rows import operator_rows  # noqa: E402

HOUR_MS = 3_600_000
#: The `$sum`'s argument as the operator receives it: typed columns (`config.ValueColumns`).
VALUE = C.ValueColumns("v")


def spec() -> C.OperatorSpec:
    accumulators = (
        C.AccumulatorPlan(name="n", op="$count", spec={}),
        C.AccumulatorPlan(name="total", op="$sum", spec="$v", inputs=(VALUE,)),
    )
    return C.OperatorSpec(
        kind="fixed",
        geometry=WindowGeometry(interval_ms=HOUR_MS, hop_ms=HOUR_MS, offset_ms=0),
        allowed_lateness_ms=0,
        idle_timeout_ms=None,
        processing_time=False,
        inner=C.InnerPlan(
            group=C.GroupPlan(accumulators=accumulators), first_operator="GroupOperator"
        ),
        source=C.WindowSource(partitions=1),
        has_dlq=False,
    )


def documents(first_seq: int, keys: range) -> pd.DataFrame:
    """One document per key, arriving from `first_seq` on, all inside the first hour."""
    n = len(keys)
    events = [1_000 + s % 1_000_000 for s in range(first_seq, first_seq + n)]
    value = {
        "v_k": pd.Series([C.CODE_INT] * n, dtype="int8"),
        "v_i": pd.Series(list(keys), dtype="int64"),
        "v_d": [0.0] * n,
        "v_j": [None] * n,
    }
    return operator_rows(first_seq, events, [f"k{k}" for k in keys], values=value)


class Bucket:
    """One bucket's operator and its state between calls."""

    def __init__(self) -> None:
        self.operator = make_operator(spec())
        self.blob: bytes | None = None
        self.calls = 0
        self.seq = 0

    def call(self, keys: range) -> float:
        """One micro-batch of one document per key in `keys`; its seconds."""
        frame = documents(self.seq, keys)
        self.seq += len(keys)
        state = FakeState(self.blob, 1_000_000 + self.calls * 1000)
        self.calls += 1
        began = time.perf_counter()
        out: Any = list(self.operator((0,), iter([frame]), state))
        spent = time.perf_counter() - began
        self.blob = state.blob
        del out
        return spent


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--touched", type=int, default=1_000)
    parser.add_argument("--touch-batches", type=int, default=5)
    parser.add_argument("--fill-batch", type=int, default=250_000)
    args = parser.parse_args()
    print(
        "open groups | state written per batch | batch touching "
        f"{args.touched:,} groups (median of {args.touch_batches}) | peak RSS"
    )
    for groups in args.groups:
        bucket = Bucket()
        for start in range(0, groups, args.fill_batch):
            bucket.call(range(start, min(groups, start + args.fill_batch)))
        times = [
            bucket.call(range(n * args.touched, (n + 1) * args.touched))
            for n in range(args.touch_batches)
        ]
        size = len(bucket.blob or b"")
        print(
            f"{groups:>11,} | {size / 1e6:>10.1f} MB ({size / groups:.0f} B per group) | "
            f"{statistics.median(times) * 1000:>8.0f} ms | {peak_rss_mb():,.0f} MB",
            flush=True,
        )


if __name__ == "__main__":
    main()
