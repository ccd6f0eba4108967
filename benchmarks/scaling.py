"""Scaling: the window throughput workload at local[1], local[2] and on a 2-worker cluster.

Reuses `window_throughput.py`'s input generator, compiled Sluice window query and measuring
loop (rows/s = input rows / wall time from `start()` until every row is committed). Each mode
runs in its own Python process (a SparkContext's master is fixed for its life):

* `local[1]`, `local[2]`: Spark inside the driver's JVM;
* `cluster`: a standalone master and 2 workers with 1 core each on 127.0.0.1
  (`service.runtime.cluster.LocalCluster`, what `sluice cluster up` runs), Sluice shipped to the
  executors as a zip, the driver separate.

    python benchmarks/scaling.py [--rows 500000] [--files 5] [--keys 1000] [--runs 3]
        [--workload tumbling] [--buckets 2]

`--buckets` is the window operator's parallelism: 1 runs the stateful part as one task whatever
the cluster size; P > 1 spreads the `$group` groups over P tasks with the same results (see
`pipeline_stages/_windowing/spark/compile.py`). Prints the hardware,
rows/s per run and the median per mode, and the ratios to local[1].
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODES = ("local[1]", "local[2]", "cluster")


def hardware() -> str:
    """Cores, RAM, CPU model and load (the machine may be shared: the load says how much)."""
    model = "unknown CPU"
    memory_gib = 0.0
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        model = next(
            (
                line.split(":", 1)[1].strip()
                for line in cpuinfo.splitlines()
                if "model name" in line
            ),
            model,
        )
        meminfo = Path("/proc/meminfo").read_text().split()
        memory_gib = int(meminfo[meminfo.index("MemTotal:") + 1]) / 1024 / 1024
    except (OSError, ValueError, IndexError):
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({model}), {memory_gib:.1f} GiB RAM, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}; "
        f"load average {load}"
    )


def child(args: argparse.Namespace) -> int:
    """Measure one mode in this process; print one JSON line."""
    from window_throughput import run_once, sluice_query

    from pipeline_stages._engine.session import build_session

    conf = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    if args.master.startswith("spark://"):
        conf |= {"spark.executor.memory": "1g", "spark.executor.cores": "1"}
    spark = build_session(master=args.master, app_name="sluice-scaling", conf=conf)
    if args.master.startswith("spark://"):
        from service.runtime.spark_code import check_executors, ship_code

        ship_code(spark, Path(tempfile.mkdtemp(prefix="sluice-scaling-code-")))
        check_executors(spark, timeout=180)
    directory = Path(args.input)

    def measure() -> Any:
        query = sluice_query(spark, directory, args.workload, args.buckets)
        return run_once(query, rows=args.rows, closing={})

    measure()  # warm-up: JIT, Python workers, executor registration
    runs = [measure() for _ in range(args.runs)]
    result = {
        "rates": [r.rows_per_s for r in runs],
        "windows": runs[-1].windows,
        "dlq": runs[-1].dlq,
    }
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")
    spark.stop()
    return 0


def run_mode(master: str, args: argparse.Namespace, input_dir: Path) -> dict[str, Any]:
    """Run a child process for `master`; its RESULT line."""
    command = [
        sys.executable, __file__, "--child", "--master", master, "--input", str(input_dir),
        "--rows", str(args.rows), "--runs", str(args.runs), "--workload", args.workload,
        "--buckets", str(args.buckets),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[len("RESULT ") :]))
    raise RuntimeError(f"{master} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--files", type=int, default=5)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workload", default="tumbling", choices=("tumbling", "hopping"))
    parser.add_argument("--buckets", type=int, default=2)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--master", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    from window_throughput import write_input

    from service.runtime.cluster import LocalCluster

    print(f"hardware: {hardware()}")
    input_dir = Path(tempfile.mkdtemp(prefix="sluice-scaling-input-"))
    write_input(input_dir, rows=args.rows, files=args.files, keys=args.keys)
    print(
        f"{args.rows:,} rows in {args.files} micro-batches, {args.keys} keys, {args.workload}, "
        f"{args.buckets} operator bucket(s), 2 shuffle partitions; medians of {args.runs} runs "
        "after one warm-up"
    )
    medians: dict[str, float] = {}
    for mode in args.modes.split(","):
        if mode == "cluster":
            cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="sluice-scaling-")) / "cluster")
            state = cluster.up(workers=2, cores=1, memory="2g")
            try:
                result = run_mode(state.master_url, args, input_dir)
            finally:
                cluster.down()
            label = "cluster 2x1"
        else:
            result, label = run_mode(mode, args, input_dir), mode
        medians[label] = statistics.median(result["rates"])
        runs = " / ".join(f"{r:,.0f}" for r in result["rates"])
        print(
            f"  {label:<12} median {medians[label]:>9,.0f} rows/s   runs {runs}   "
            f"windows {result['windows']:,}  dlq {result['dlq']:,}"
        )
    base = medians.get("local[1]")
    if base:
        for label, rate in medians.items():
            print(f"  ratio {label} / local[1] = {rate / base:.2f}")
    print(f"load average after: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    shutil.rmtree(input_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
