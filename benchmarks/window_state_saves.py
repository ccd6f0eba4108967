"""The batch window engine's state saves: a snapshot every batch vs snapshot + deltas.

A 1-hour tumbling window with `$sum`/`$avg`/`$count` per key over many keys, fed in small
micro-batches (the low-latency case), so the open groups grow batch after batch while each
batch touches few of them. Both modes run the same batches through the batch engine
(`batch.engine.BatchWindow`, state in a temporary directory) in the same process: `snapshots`
rewrites the whole state after every batch (the engine before `batch.state`), `deltas`
writes only the groups the batch folded into. Prints, per mode, the median time of a batch
and of its state save over the last quarter of the batches, the state size there, and the
ratios. Both modes' emitted envelopes and final states are compared: they must be identical.

    python benchmarks/window_state_saves.py [--keys 100000] [--rows-per-batch 1000]
        [--batches 80] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import window_throughput as W  # noqa: E402  (a sibling script, not a package)

HOUR_MS = 3_600_000


def write_batches(directory: Path, *, keys: int, per_batch: int, batches: int) -> list[Path]:
    """One parquet file per micro-batch; event time 1 ms per row, all in the first hour."""
    rows = per_batch * batches
    rng = np.random.default_rng(3)
    seq = np.arange(rows, dtype=np.int64)
    key = np.array([f"k{n}" for n in range(keys)])[rng.integers(0, keys, rows)]
    values = np.round(rng.random(rows) * 100, 2)
    W.write_parquet(directory, files=batches, seq=seq, ts=W.BASE_MS + seq, key=key, v=values)
    return sorted(directory.glob("*.parquet"))


def batch_window(spark: Any, path: Path) -> tuple[Any, Any]:
    """The compiled window (1-hour tumbling `$group`) over one file, read as a static frame."""
    W.INTERVAL_MS = HOUR_MS
    streaming = W.stream

    def static(spark: Any, directory: Path, fmt: str = "typed") -> Any:
        del fmt
        return spark.read.schema(W.SCHEMA).parquet(str(directory))

    W.stream = static  # type: ignore[assignment]
    try:
        return W.sluice_query(spark, path, "tumbling", 1, "typed", engine="batch")
    finally:
        W.stream = streaming


def run_mode(spark: Any, paths: list[Path], *, deltas: bool) -> dict[str, Any]:
    """Every batch through one engine; per-batch and per-save seconds, sizes, envelopes."""
    _, window = batch_window(spark, paths[0])
    window.deltas = deltas
    window.bind(tempfile.mkdtemp(prefix="sluice-state-saves-"))
    saves: list[float] = []
    save = window._save  # noqa: SLF001 - timed, not replaced

    def timed_save(*args: Any) -> int:
        started = time.perf_counter()
        size = save(*args)
        saves.append(time.perf_counter() - started)
        return size

    window._save = timed_save  # noqa: SLF001
    batches, envelopes = [], []
    for batch_id, path in enumerate(paths):
        frame, _ = batch_window(spark, path)
        started = time.perf_counter()
        envelopes.append([row for row in window.run(frame, batch_id) if row[0] != "stats"])
        batches.append(time.perf_counter() - started)
    tail = len(paths) * 3 // 4
    files = list(window.state_dir.iterdir())
    return {
        "batch_s": statistics.median(batches[tail:]),
        "save_s": statistics.median(saves[tail:]),
        "files_mb": sum(p.stat().st_size for p in files) / 1e6,
        "groups": sum(len(c) for c in window._live[2].windows.values()),  # noqa: SLF001
        "envelopes": envelopes,
        "state": window._live[2],  # noqa: SLF001
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rows-per-batch", type=int, default=1000)
    parser.add_argument("--batches", type=int, default=80)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    spark = W.local_session("sluice-window-state-saves")
    directory = Path(tempfile.mkdtemp(prefix="sluice-state-saves-input-"))
    paths = write_batches(
        directory, keys=args.keys, per_batch=args.rows_per_batch, batches=args.batches
    )
    print(
        f"{args.batches} batches of {args.rows_per_batch:,} rows, {args.keys:,} keys, "
        "1-hour tumbling $group; medians over the last quarter of the batches"
    )
    results: dict[str, list[dict[str, Any]]] = {"snapshots": [], "deltas": []}
    run_mode(spark, paths[: max(4, args.batches // 10)], deltas=True)  # warm-up, discarded
    for n in range(args.runs):
        for mode in ("snapshots", "deltas") if n % 2 == 0 else ("deltas", "snapshots"):
            results[mode].append(run_mode(spark, paths, deltas=mode == "deltas"))
    for field in ("envelopes", "state"):
        if results["snapshots"][0][field] != results["deltas"][0][field]:
            raise SystemExit(f"the two modes ended with different {field}")
    summary = {}
    for mode, runs in results.items():
        batch = statistics.median(r["batch_s"] for r in runs)
        save = statistics.median(r["save_s"] for r in runs)
        summary[mode] = (batch, save)
        print(
            f"  {mode:<10} batch {batch * 1000:7.1f} ms   save {save * 1000:7.1f} ms   "
            f"open groups {runs[-1]['groups']:,}   state files {runs[-1]['files_mb']:.1f} MB"
        )
    (batch_s, save_s), (batch_d, save_d) = summary["snapshots"], summary["deltas"]
    print(f"  ratio deltas / snapshots: batch {batch_d / batch_s:.2f}   save {save_d / save_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
