"""End to end, as a user runs it: `sluice serve` against native Structured Streaming.

What it measures (issues 23 and 24's targets): rows per second from the moment a processor
is started through the REST API until every input row is in its sink, for the real service
(`sluice serve` of this checkout: uvicorn with Spark inside, default settings, a free
loopback port, a temporary data directory) and, in the same run, for plain Structured
Streaming in a separate Python process with its own SparkSession at the service's default
master (`local[*]`) and shuffle partition count, reading the same files with the same rows
per micro-batch (`maxFilesPerTrigger=1`, one file per batch; Sluice's File source with
`config.maxOffsetsPerTrigger` = the rows of a file). Medians of `--runs`, the two sides
alternating first, after a discarded warm-up run of each on a small input.

Pipelines (`--pipelines`, comma-separated):

* `emit`: a `File` connection -> `$match` -> `$addFields` -> `$project` -> `$emit` to files;
  native: `readStream.text` -> `from_json` with the schema -> filter -> select -> JSON file
  sink. Done when the sink's files hold every matching row.
* `merge`: the same into `$merge` into `local`; native: a hand-written `foreachBatch` that
  upserts the same rows into SQLite with `executemany`. Done when the processor's stats
  count every matching row written (`outputMessageCount`; Sluice counts a batch after its
  sink has written it).
* `tumbling`: `$tumblingWindow` 10 s, `$group` count/sum/avg per key (1000 keys), allowed
  lateness 3 s, `$merge` into `local`, DLQ on; 0.1 % of the rows are 120 s late (Sluice's
  DLQ; native drops them). Native: `withWatermark` + `window()`, append mode, the windows
  upserted into SQLite. Done when every row has been read (`inputMessageCount`; windows
  still open at the end stay open on both sides).
* `hopping`: the same with `$hoppingWindow` 10 s every 5 s, `$push` and `$top`; native
  `collect_list` and `max_by`.
* `ingest-tumbling`, `ingest-hopping`: the window pipelines above reading an `HttpIngest`
  connection instead of the files: every row is POSTed first, from one thread so that the
  spool holds the files' order and the DLQ is the File run's (the route's rate is
  `accepted_per_s`), then the processor starts and is timed as `tumbling` is. Native reads
  the files as for `tumbling`/`hopping`.
* `ingest`: an `HttpIngest` connection -> `$match` -> `$emit` to files: the accepted
  documents per second of `POST /ingest/{connection}` (NDJSON bodies of `--ingest-batch`
  records from `--ingest-concurrency` threads; answered once fsynced) and rows per second
  from the first POST until every matching row is in the sink. No native counterpart.
* `latency`: one record every `--latency-gap` seconds into a live directory, event time =
  the wall clock, `$tumblingWindow` 2 s count per key, allowed lateness 0, 1 s trigger
  (service default; native given the same): p50 seconds from the record that closes a
  window to its result in the sink's files, and the per-batch cost of those 1-row
  micro-batches (Spark's `triggerExecution`, ms, median) on both sides. Reported, never
  asserted.

The table gives, per pipeline and rows per batch, the medians of both sides' rows/s and
their ratio; the same after the first batch (rows after it over the time after it: the
first batch also pays for starting the query, compiling and the Python workers' start, which
with few batches per run weighs heavily); each run's rows/s; the seconds to the first batch;
and CPU seconds. All pipelines carry a DLQ into `local` (as a user would set one).

CPU seconds per run, read from /proc: the service's Python process (the driver: uvicorn,
the foreachBatch sink, the stores) and everything below it (the JVM with the local
executors, Python workers, data source runners), and the same for the native process. With
the service on a standalone cluster on this machine (`--service-env
SLUICE_SPARK_MASTER=spark://...`), each Sluice run also reports its executors' CPU seconds
(every `CoarseGrainedExecutorBackend` process and its Python workers) and the driver's CPU
as a fraction of theirs (`driver_cpu_vs_executors`).
`--profile S` samples the service's Python with py-spy (`pip install py-spy`) for S seconds
from the first batch of the first measured run of the first pipeline listed, at the largest
batch size (with `--profile-workers`, Spark's Python workers under it too), and prints the
busiest functions (`--keep` keeps the collapsed stacks in the work directory).

Trigger: the service runs its default (`SLUICE_TRIGGER_INTERVAL`, 1 s: none of these
pipelines closes windows on the wall clock, so their micro-batches run back to back while
input waits, and an idle query looks for input once a second, `session.start_query`); native
runs Spark's default (the next batch as soon as the last is done) unless `--native-trigger`.
`--service-env KEY=VALUE` changes a service setting. The machine this runs on may be shared:
compare the ratios of one run, not rows/s across runs.

    PYTHONPATH=$PWD python3 benchmarks/e2e_throughput.py --quick
    PYTHONPATH=$PWD python3 benchmarks/e2e_throughput.py --pipelines emit,merge,tumbling \
        --batch-rows 10000,120000 --runs 3 --profile 25
    PYTHONPATH=$PWD python3 benchmarks/e2e_throughput.py --pipelines ingest,latency
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e_support as S  # noqa: E402 - benchmarks/ is not a package
from e2e_runs import Bench, Run  # noqa: E402

THROUGHPUT = ("emit", "merge", "tumbling", "hopping", "ingest-tumbling", "ingest-hopping")


# --------------------------------------------------------------------------- running


def median_cpu(runs: list[Run]) -> S.Cpu:
    """The medians of the runs' CPU seconds (each part on its own)."""
    return S.Cpu(
        statistics.median(r.cpu.python for r in runs), statistics.median(r.cpu.below for r in runs)
    )


def table_row(pipeline: str, per_batch: int, sluice: list[Run], native: list[Run]) -> list[str]:
    """One line of the summary table (`HEAD`)."""
    cells = [pipeline, f"{per_batch:,}"]
    rates = [_median(sluice, "rows_per_s")] + ([_median(native, "rows_per_s")] if native else [])
    steady = [_median(sluice, "steady_rows_per_s")]
    steady += [_median(native, "steady_rows_per_s")] if native else []
    for values in (rates, steady):
        cells += [f"{v:,.0f}" for v in values] + ["-"] * (2 - len(values))
        cells.append(f"{values[0] / values[1]:.2f}x" if len(values) == 2 else "-")
    cells += [_runs(sluice), _runs(native) if native else "-"]
    first = [_median(runs, "first_batch_s") for runs in (sluice, native) if runs]
    cells.append(" / ".join(f"{v:.1f}" for v in first))
    for runs in (sluice, native):
        cpu = median_cpu(runs) if runs else None
        cells.append(f"{cpu.python:.1f} + {cpu.below:.1f}" if cpu else "-")
    return cells


def _median(runs: list[Run], name: str) -> float:
    values = [r.rows_per_s if name == "rows_per_s" else r.detail[name] for r in runs]
    values = [v for v in values if v == v]  # NaN: a run whose first batch held every row
    return statistics.median(values) if values else float("nan")


HEAD = ["pipeline", "rows/batch", "sluice rows/s", "native rows/s", "ratio",
        "sluice after 1st batch", "native after 1st batch", "ratio after 1st batch",
        "sluice runs", "native runs", "s to 1st batch (sluice / native)",
        "sluice CPU s (python + below)", "native CPU s (python + below)"]  # fmt: skip


def _runs(runs: list[Run]) -> str:
    return " / ".join(f"{r.rows_per_s:,.0f}" for r in runs)


def throughput(bench: Bench, args: argparse.Namespace, table: list[list[str]]) -> None:
    """Every `THROUGHPUT` pipeline asked for, at every rows-per-batch size."""
    warm = S.write_dataset(bench.files / "warm", per_file=2000, files=2, keys=args.keys)
    for pipeline in [p for p in args.pipelines if p in THROUGHPUT]:
        try:
            if args.runs > 1:  # the first run of each side pays one-off costs: discarded
                bench.sluice_run(pipeline, warm)
                bench.native_run(pipeline, warm)
            for per_batch in args.batch_rows:
                table.append(measure(bench, args, pipeline, per_batch))
        except (Exception, SystemExit) as error:  # the next pipeline may still run
            if isinstance(error, SystemExit) and error.code == 143:
                raise
            print(f"{pipeline} stopped: {error}", flush=True)


def measure(bench: Bench, args: argparse.Namespace, pipeline: str, per_batch: int) -> list[str]:
    """`--runs` runs of both sides, alternating which goes first; the table's line."""
    data = bench_data(bench, args, per_batch)
    sluice: list[Run] = []
    native: list[Run] = []
    for n in range(args.runs):
        largest = per_batch == max(args.batch_rows)
        profile = args.profile if pipeline == args.pipelines[0] and n == 0 and largest else 0
        for side in ("sluice", "native") if n % 2 == 0 else ("native", "sluice"):
            if side == "sluice":
                sluice.append(bench.sluice_run(pipeline, data, profile=profile))
            else:
                native.append(bench.native_run(pipeline, data))
        print(
            f"  {pipeline} {per_batch:,}/batch run {n + 1}: "
            f"sluice {sluice[-1].rows_per_s:,.0f} rows/s {sluice[-1].detail}, "
            f"native {native[-1].rows_per_s:,.0f} rows/s {native[-1].detail}",
            flush=True,
        )
    return table_row(pipeline, per_batch, sluice, native)


_datasets: dict[int, S.Dataset] = {}


def bench_data(bench: Bench, args: argparse.Namespace, per_batch: int) -> S.Dataset:
    """The input for a rows-per-batch size (written once per process)."""
    if per_batch not in _datasets:
        files = max(args.min_batches, args.rows // per_batch)
        print(f"writing {files} files of {per_batch:,} rows", flush=True)
        _datasets[per_batch] = S.write_dataset(
            bench.files / f"in-{per_batch}", per_file=per_batch, files=files, keys=args.keys
        )
    return _datasets[per_batch]


def ingest(bench: Bench, args: argparse.Namespace, table: list[list[str]]) -> None:
    """HTTP ingest at every rows-per-batch size: the route's rate is printed, end to end
    goes into the table."""
    if "ingest" not in args.pipelines:
        return
    for per_batch in args.batch_rows:
        data = bench_data(bench, args, per_batch)
        runs = []
        for n in range(args.runs):
            runs.append(bench.ingest_run(data))
            print(
                f"  ingest {per_batch:,}/batch run {n + 1}: end to end "
                f"{runs[-1].rows_per_s:,.0f} rows/s {runs[-1].detail}",
                flush=True,
            )
        accepted = statistics.median(r.detail["accepted_per_s"] for r in runs)
        print(f"  ingest route: median {accepted:,.0f} documents/s accepted (fsynced)")
        table.append(table_row("ingest", per_batch, runs, []))


def latency(bench: Bench, args: argparse.Namespace, _table: list[list[str]]) -> None:
    """The latency run of each side (printed, not in the table)."""
    if "latency" not in args.pipelines:
        return
    for side in ("sluice", "native"):
        result = bench.latency_run(side)
        print(
            f"latency {side:<6}: window result p50 {result['latency_p50_s']:.2f} s after its closing record "
            f"({result['windows']} windows); 1-row micro-batch p50 {result['batch_ms_p50']:.0f} ms "
            f"({result['one_row_batches']} batches)",
            flush=True,
        )
        phases = ", ".join(f"{name} {ms:.0f}" for name, ms in result["phases_ms_p50"].items())
        print(f"  its phases, ms (p50 each): {phases}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipelines", default="emit,merge,tumbling,hopping")
    parser.add_argument(
        "--batch-rows", default="10000,120000", help="rows per micro-batch (one file each)"
    )
    parser.add_argument(
        "--rows", type=int, default=120_000, help="rows per run (at least --min-batches files)"
    )
    parser.add_argument("--min-batches", type=int, default=3)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--quick", action="store_true", help="1 run, batches of 1k and 12k, 2 files each"
    )
    parser.add_argument(
        "--master", default="local[*]", help="native's master (the service's default)"
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=min(8, max(1, os.cpu_count() or 2)),
        help="native's shuffle partitions (the service's default: cores, at most 8)",
    )
    parser.add_argument(
        "--native-trigger", default="", help="e.g. '1 second' (default: Spark's, none)"
    )
    parser.add_argument(
        "--profile-workers",
        action="store_true",
        help="the profile also samples the Python processes under the service (Spark's workers)",
    )
    parser.add_argument("--service-env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--ingest-batch", type=int, default=1000)
    parser.add_argument("--ingest-concurrency", type=int, default=4)
    parser.add_argument("--latency-records", type=int, default=15)
    parser.add_argument("--latency-gap", type=float, default=1.5, help="seconds between records")
    parser.add_argument(
        "--profile",
        type=float,
        default=0,
        help="seconds of py-spy on the first pipeline's first run at the largest batch",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds one run may take")
    parser.add_argument("--keep", action="store_true", help="keep the work directory and logs")
    args = parser.parse_args(argv)
    args.pipelines = args.pipelines.split(",")
    args.batch_rows = [int(b) for b in args.batch_rows.split(",")]
    if args.quick:
        args.runs, args.min_batches, args.rows = 1, 2, 0
        args.batch_rows = [max(1, b // 10) for b in args.batch_rows]
        args.latency_records = 5
    # SIGTERM (a stopped benchmark) still stops the service and the native process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    bench = Bench(args)
    table: list[list[str]] = []
    try:
        for part in (throughput, ingest, latency):
            try:
                part(bench, args, table)
            except (Exception, SystemExit) as error:  # the other parts may still run
                print(f"{part.__name__} stopped: {error}", flush=True)
                if isinstance(error, SystemExit) and error.code == 143:
                    raise
    finally:
        bench.close()
        print()
        print("| " + " | ".join(HEAD) + " |")
        print("|" + "---|" * len(HEAD))
        for row in table:
            print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
