"""What count-based panes (issue 25) cost the window operator, against the same window
without `trigger`, in one process.

Drives the operator function itself (no Spark: what `applyInPandasWithState` calls per bucket
and micro-batch) over the same input: a 10 s tumbling `$group` (`$count` per key) over
`--rows` documents in `--batches` micro-batches, event time rising 1 ms per document, so
windows close as the stream goes. Pipelines: no trigger (Atlas), then `early: {count: N}`
accumulating for each N in `--counts`. Prints rows/s per pipeline, the ratio against the one
without trigger, and the results each emitted.

    python benchmarks/window_panes.py [--rows 400000] [--batches 8] [--keys 100] [--counts 1000 100]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_stages._stream.frame import KIND_OUTPUT  # noqa: E402
from pipeline_stages._windowing.geometry import WindowGeometry  # noqa: E402
from pipeline_stages._windowing.runtime import config as C  # noqa: E402
from pipeline_stages._windowing.runtime.operator import make_operator  # noqa: E402
from tests.unit.windowing.group_state import FakeState  # noqa: E402


def spec(count: int | None) -> C.OperatorSpec:
    plan = C.AccumulatorPlan(name="n", op="$count", spec={})
    return C.OperatorSpec(
        kind="fixed",
        geometry=WindowGeometry(interval_ms=10_000, hop_ms=10_000, offset_ms=0),
        allowed_lateness_ms=0,
        idle_timeout_ms=None,
        processing_time=False,
        inner=C.InnerPlan(group=C.GroupPlan(accumulators=(plan,)), first_operator="GroupOperator"),
        source=C.WindowSource(partitions=1),
        has_dlq=False,
        panes=None if count is None else C.PaneSpec(mode="accumulating", early_count=count),
    )


def batch(first: int, n: int, keys: int) -> pd.DataFrame:
    seqs = range(first, first + n)
    nothing = [None] * n
    return pd.DataFrame(
        {
            "part": pd.Series([0] * n, dtype="int32"),
            "seq": seqs,
            "sub": [0] * n,
            C.DOC_SUB: [0] * n,
            "event_ms": list(seqs),
            C.FLAG: pd.Series([C.FLAG_OK] * n, dtype="int8"),
            C.ORIG: nothing,
            C.FDOC: nothing,
            C.FMETA: nothing,
            C.REASON: nothing,
            C.OPERATOR: nothing,
            C.KEY: [f'"k{s % keys}"' for s in seqs],
        }
    )


def run(op_spec: C.OperatorSpec, batches: list[pd.DataFrame]) -> tuple[float, int]:
    """Seconds spent in the operator over `batches`, and the results it emitted."""
    operator = make_operator(op_spec)
    blob, results, spent = None, 0, 0.0
    for n, frame in enumerate(batches):
        state = FakeState(blob, 1_000 + n)
        began = time.perf_counter()
        out: Any = pd.concat(list(operator((0,), iter([frame.copy()]), state)))
        spent += time.perf_counter() - began
        blob = state.blob
        results += int((out["kind"] == KIND_OUTPUT).sum())
    return spent, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 100])
    args = parser.parse_args()
    size = args.rows // args.batches
    batches = [batch(i * size, size, args.keys) for i in range(args.batches)]
    rows = size * args.batches
    run(spec(None), batches[:1])  # warm-up (imports, first-call caches)
    base, base_results = run(spec(None), batches)
    print(f"no trigger           {rows / base:>12,.0f} rows/s  1.00x  {base_results:,} results")
    for count in args.counts:
        spent, results = run(spec(count), batches)
        print(
            f"early count {count:<8} {rows / spent:>12,.0f} rows/s  {base / spent:.2f}x  "
            f"{results:,} results"
        )


if __name__ == "__main__":
    main()
