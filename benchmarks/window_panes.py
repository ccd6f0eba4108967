"""What panes (issue 25) cost the window operator, against the same window without
`trigger`, in one process.

Drives the operator function itself (no Spark: what `applyInPandasWithState` calls per bucket
and micro-batch) over the same input: a 10 s tumbling `$group` (`$count` per key) over
`--rows` documents in `--batches` micro-batches, event time rising 1 ms per document, so
windows close as the stream goes; processing time advances `--batch-ms` per micro-batch.
Pipelines: no trigger (Atlas), then `early: {count: N}` accumulating for each N in
`--counts`, `early: {every: --every-ms}`, and `early: {count: N}` with
`accumulatingAndRetracting`. With `--late`, a second input in which every tenth document
arrives up to 4 s behind the stream (allowedLateness 5 s) runs the Beam model's
`late: {count: 1}` against the same window without trigger. Prints rows/s per pipeline, the
ratio against its baseline, and the results each emitted.

    python benchmarks/window_panes.py [--rows 400000] [--batches 8] [--keys 100] \
        [--counts 1000 100] [--every-ms 1000] [--batch-ms 500] [--late]
"""

from __future__ import annotations

import argparse
import statistics
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
from tests.unit.windowing.operator_rows import operator_rows  # noqa: E402


def spec(panes: C.PaneSpec | None, lateness_ms: int = 0) -> C.OperatorSpec:
    plan = C.AccumulatorPlan(name="n", op="$count", spec={})
    return C.OperatorSpec(
        kind="fixed",
        geometry=WindowGeometry(interval_ms=10_000, hop_ms=10_000, offset_ms=0),
        allowed_lateness_ms=lateness_ms,
        idle_timeout_ms=None,
        processing_time=False,
        inner=C.InnerPlan(group=C.GroupPlan(accumulators=(plan,)), first_operator="GroupOperator"),
        source=C.WindowSource(partitions=1),
        has_dlq=False,
        panes=panes,
    )


def batch(first: int, n: int, keys: int, *, behind: bool = False) -> pd.DataFrame:
    """`n` documents from source position `first`; with `behind`, every tenth one's event
    time is up to 4 s behind its position (late for the window before, but allowed)."""
    seqs = range(first, first + n)
    events = [s - (s * 7919) % 4_000 if behind and s % 10 == 0 else s for s in seqs]
    return operator_rows(first, events, [f"k{s % keys}" for s in seqs])


def timed(
    op_spec: C.OperatorSpec, batches: list[pd.DataFrame], batch_ms: int, runs: int
) -> tuple[float, int]:
    """The median of `runs` runs' seconds, and the results emitted."""
    out = [run(op_spec, batches, batch_ms) for _ in range(runs)]
    return statistics.median(spent for spent, _ in out), out[0][1]


def run(
    op_spec: C.OperatorSpec, batches: list[pd.DataFrame], batch_ms: int = 1000
) -> tuple[float, int]:
    """Seconds spent in the operator over `batches` (processing time `batch_ms` apart), and
    the results it emitted."""
    operator = make_operator(op_spec)
    blob, results, spent = None, 0, 0.0
    for n, frame in enumerate(batches):
        state = FakeState(blob, 1_000_000 + n * batch_ms)
        began = time.perf_counter()
        out: Any = pd.concat(list(operator((0,), iter([frame.copy()]), state)))
        spent += time.perf_counter() - began
        blob = state.blob
        results += int((out["kind"] == KIND_OUTPUT).sum())
    return spent, results


def report(name: str, rows: int, spent: float, base: float, results: int) -> None:
    print(f"{name:<34} {rows / spent:>12,.0f} rows/s  {base / spent:.2f}x  {results:,} results")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 100])
    parser.add_argument("--every-ms", type=int, default=1000)
    parser.add_argument("--batch-ms", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3, help="medians of this many runs")
    parser.add_argument("--late", action="store_true")
    args = parser.parse_args()
    size = args.rows // args.batches
    batches = [batch(i * size, size, args.keys) for i in range(args.batches)]
    rows = size * args.batches
    run(spec(None), batches[:1])  # warm-up (imports, first-call caches)
    base, base_results = timed(spec(None), batches, args.batch_ms, args.runs)
    report("no trigger", rows, base, base, base_results)
    variants = [
        (f"early count {n}", C.PaneSpec(mode="accumulating", early_count=n)) for n in args.counts
    ]
    variants.append(
        (
            f"early every {args.every_ms} ms",
            C.PaneSpec(mode="accumulating", early_every_ms=args.every_ms),
        )
    )
    variants.append(
        (
            f"early count {args.counts[0]} retracting",
            C.PaneSpec(mode="accumulatingAndRetracting", early_count=args.counts[0]),
        )
    )
    for name, panes in variants:
        spent, results = timed(spec(panes), batches, args.batch_ms, args.runs)
        report(name, rows, spent, base, results)
    if args.late:
        behind = [batch(i * size, size, args.keys, behind=True) for i in range(args.batches)]
        late_base, late_results = timed(spec(None, 5_000), behind, args.batch_ms, args.runs)
        report("behind, no trigger (lateness 5 s)", rows, late_base, late_base, late_results)
        for name, panes in [
            ("behind, late count 1", C.PaneSpec(mode="accumulating", late_count=1)),
            (
                "behind, late count 1 retracting",
                C.PaneSpec(mode="accumulatingAndRetracting", late_count=1),
            ),
        ]:
            spent, results = timed(spec(panes, 5_000), behind, args.batch_ms, args.runs)
            report(name, rows, spent, late_base, results)


if __name__ == "__main__":
    main()
