"""Sink throughput: File → `$match` → `$addFields` → `$emit` to files, or → `$merge` into `local`.

Runs the service's own writer stack (sink, DLQ writer, SQLite sample buffer, stats) behind
the query's `foreachBatch`, as `sluice serve` builds it, in one process:

* `executors`: the sink writes each partition on the executors and the driver receives the
  partitions' summaries (`pipeline_stages._engine.partitions`);
* `driver`: the batch's envelopes are collected into the driver and written there by the
  connector's driver-side writer (`build_run_sink`), which is what every batch did before.

Run with another checkout's code first on the path (`PYTHONPATH=/path/to/checkout`) to
measure that checkout; a checkout without the executor path runs `driver` only.

    python benchmarks/sink_throughput.py [--rows 10000 120000] [--batches 3] [--runs 3]
        [--sinks file merge] [--modes driver executors] [--profile]

Prints rows/s per run (input rows over the summed `triggerExecution` of the batches after
the first, which also starts Spark's Python workers), the
medians, the ratio executors / driver, and with `--profile` where the driver's time per
batch goes (Spark job with the executors' writes, assembling the summary, publishing, the
DLQ/sample/stats writer).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Appended, so a checkout named first on PYTHONPATH is the one measured.
sys.path.append(str(Path(__file__).resolve().parents[1]))

from pipeline_stages import parse_pipeline  # noqa: E402
from pipeline_stages._connectors.sources.register import register_all  # noqa: E402
from pipeline_stages._engine.session import build_session  # noqa: E402
from pipeline_stages._stream.context import ConnectionInfo  # noqa: E402
from service.manager.stats import LiveStats  # noqa: E402
from service.manager.writers import DlqWriter, ProcessorWriter, SampleBuffer  # noqa: E402
from service.runtime import sink_resources  # noqa: E402
from service.runtime.assemble import compile_context, compile_run  # noqa: E402
from service.stores.sqlite import SqliteStores  # noqa: E402

SINKS: dict[str, dict[str, Any]] = {
    "file": {"$emit": {"connectionName": "files", "path": "out"}},
    "merge": {"$merge": {"into": {"connectionName": "local", "db": "app", "coll": "out"}}},
}
STAGES: list[dict[str, Any]] = [
    {"$match": {"status": "ok", "reading": {"$gte": 10}}},
    {"$addFields": {"watts": {"$multiply": ["$reading", 1.5]}, "site": {"$toUpper": "$site"}}},
]
SAMPLE_SIZE = 1000
TIMINGS: dict[str, float] = defaultdict(float)


def write_input(directory: Path, rows: int) -> None:
    """JSON-lines sensor documents (about 80 % pass the `$match`)."""
    rng = random.Random(7)
    directory.mkdir(parents=True)
    with (directory / "000.jsonl").open("w") as handle:
        for n in range(rows):
            doc = {
                "device": f"d{rng.randrange(1000)}",
                "site": rng.choice(["north", "south", "east"]),
                "status": "ok" if rng.random() < 0.9 else "fault",
                "reading": rng.randrange(0, 100),
                "seq": n,
            }
            handle.write(json.dumps(doc) + "\n")


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            TIMINGS[name] += time.perf_counter() - start

    return wrapper


def instrument() -> None:
    """Time the driver's steps of each batch (`--profile`)."""
    from pipeline_stages._engine import sink as engine_sink

    # Patched in place (the benchmark's own process), so every sink the run builds is timed;
    # what an older checkout lacks is left out (its sink summarised with a function).
    steps = [
        (getattr(engine_sink, "Summarizer", None), "__call__", "summarize"),
        (engine_sink, "summarize", "summarize"),
        (engine_sink, "assemble", "assemble"),
        (ProcessorWriter, "write", "writer (DLQ, sample, stats)"),
        (engine_sink.ForeachBatchSink, "__call__", "foreachBatch total"),
    ]
    for owner, attribute, name in steps:
        if owner is not None and hasattr(owner, attribute):
            setattr(owner, attribute, timed(name, getattr(owner, attribute)))


def run_once(spark: Any, sink: str, mode: str, rows: int, batches: int) -> float:
    with tempfile.TemporaryDirectory(prefix="sink-bench-") as tmp:
        root = Path(tmp)
        write_input(root / "files" / "in", rows * batches)
        files = ConnectionInfo("files", "File", {"directory": str(root / "files")})
        source = {"connectionName": "files", "path": "in", "config": {"maxOffsetsPerTrigger": rows}}
        pipeline = [{"$source": source}, *STAGES, SINKS[sink]]
        stores = SqliteStores(root / "sluice.db")
        try:
            ctx = compile_context(
                spark,
                processor="bench",
                connections={"files": files},
                has_dlq=True,
                batch_size=rows,
            )
            parsed = parse_pipeline(pipeline)
            compiled = compile_run(parsed, ctx)
            resources = sink_resources.StoreSinkResources(
                local=stores.documents,
                connections={"files": files},
                clients=sink_resources.ClusterClients(),
            )
            build = getattr(
                sink_resources,
                "build_run_partition_sink" if mode == "executors" else "build_run_sink",
            )
            writer = ProcessorWriter(
                generation=1,
                stats=LiveStats(),
                sample=SampleBuffer(stores.documents, "bench", capacity=SAMPLE_SIZE),
                dlq=DlqWriter(lambda: stores.dlq("d", "dlq"), processor="bench", instance="b"),
                sink=build(parsed, resources, processor="bench", run_tag="r"),
            )
            foreach = compiled.foreach_batch(writer, processor="bench", state_dir=None)
            cpu = time.process_time()
            query = (
                compiled.envelopes.writeStream.foreachBatch(foreach)
                .option("checkpointLocation", str(root / "checkpoint"))
                .trigger(processingTime="0 seconds")
                .start()
            )
            try:
                deadline = time.monotonic() + 1800
                while (
                    writer.stats.totals["outputMessageCount"] == 0 or _input(query) < rows * batches
                ):
                    if query.exception() is not None:
                        raise RuntimeError(str(query.exception()))
                    if time.monotonic() > deadline:
                        raise TimeoutError("the query did not finish")
                    time.sleep(0.2)
                progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
                if len(progress) > 1:
                    progress = progress[1:]  # the first batch starts the Python workers
            finally:
                query.stop()
            TIMINGS["driver Python CPU (whole run)"] += time.process_time() - cpu
            written = writer.stats.totals["outputMessageCount"]
            check = _count_outputs(root, stores, sink)
            if check != written:
                raise AssertionError(f"{check} documents in the sink, {written} counted")
            seconds = sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000
            return sum(p["numInputRows"] for p in progress) / seconds
        finally:
            stores.close()


def _input(query: Any) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)


def _count_outputs(root: Path, stores: Any, sink: str) -> int:
    if sink == "merge":
        return int(stores.documents.count("app", "out"))
    out = root / "files" / "out"
    return sum(len(p.read_text().splitlines()) for p in out.iterdir() if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 120_000])
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sinks", nargs="+", default=["file", "merge"])
    parser.add_argument("--modes", nargs="+", default=["driver", "executors"])
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    modes = [
        m
        for m in args.modes
        if m == "driver" or hasattr(sink_resources, "build_run_partition_sink")
    ]
    if args.profile:
        instrument()
    spark = build_session(master="local[2]", app_name="sink-bench")
    spark.sparkContext.setLogLevel("ERROR")
    register_all(spark)
    import service

    print(f"code: {Path(service.__file__).parents[1]}", flush=True)
    for sink in args.sinks:
        for rows in args.rows:
            medians: dict[str, float] = {}
            for mode in modes:
                TIMINGS.clear()
                rates = [run_once(spark, sink, mode, rows, args.batches) for _ in range(args.runs)]
                medians[mode] = statistics.median(rates)
                shown = ", ".join(f"{r:,.0f}" for r in rates)
                print(
                    f"{sink:5s} {rows:>7,d} rows/batch {mode:9s}: {shown} rows/s "
                    f"(median {medians[mode]:,.0f})",
                    flush=True,
                )
                if args.profile:
                    count = args.runs * args.batches  # per batch, the first one included
                    for name, total in sorted(TIMINGS.items(), key=lambda i: -i[1]):
                        print(f"    {name:30s} {1000 * total / count:9.1f} ms/batch", flush=True)
            if len(medians) == 2:
                ratio = medians["executors"] / medians["driver"]
                print(
                    f"{sink:5s} {rows:>7,d} rows/batch executors/driver: {ratio:.2f}x", flush=True
                )
    spark.stop()


if __name__ == "__main__":
    main()
