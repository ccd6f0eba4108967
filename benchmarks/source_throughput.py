"""Source throughput: each Sluice source alone against Spark's native text source.

Every run reads the same N JSON lines to Spark's `noop` sink, at a given number of rows per
micro-batch, in one process (`local[2]` by default):

* `native`: `spark.readStream.text` (files of `rows-per-batch` lines, `maxFilesPerTrigger=1`)
  → `from_json` with the schema known: the baseline;
* `file`, `http`, `kafka`: Sluice's File, HTTP-ingest (spool) and Kafka sources
  (`maxRecordsPerBatch`/`maxOffsetsPerTrigger` = rows per batch), raw rows only (`raw`), and
  through the `$source` step (`ingest`: parse into VARIANT, stamp `_ts`/`_stream_meta`, the
  DLQ reason, the input counts), which is what `from_json` compares with.

Kafka runs only with `--kafka` (it starts the tests' noida-db broker and produces N messages
into a topic of `--kafka-partitions` partitions).

    PYTHONPATH=$PWD python3 benchmarks/source_throughput.py [--rows 120000] \
        [--batch 10000 --batch 120000] [--runs 3] [--kafka]

Prints rows/s per run, medians, and each median's ratio to the native median of the same
batch size.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

SCHEMA = "device STRING, site STRING, status STRING, reading BIGINT, watts DOUBLE, seq BIGINT"


def documents(rows: int) -> list[str]:
    """Sensor-like JSON documents (a fractional number in each, as real data has)."""
    rng = random.Random(7)
    return [
        json.dumps(
            {
                "device": f"d{rng.randrange(1000)}",
                "site": rng.choice(["north", "south", "east"]),
                "status": "ok" if rng.random() < 0.9 else "fault",
                "reading": rng.randrange(0, 100),
                "watts": round(rng.random() * 100, 3),
                "seq": n,
            }
        )
        for n in range(rows)
    ]


def write_files(directory: Path, lines: list[str], per_file: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, first in enumerate(range(0, len(lines), per_file)):
        chunk = lines[first : first + per_file]
        (directory / f"part-{index:05d}.json").write_text("\n".join(chunk) + "\n")


def native(spark: SparkSession, directory: Path) -> DataFrame:
    text = spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))
    return text.select(F.from_json("value", SCHEMA).alias("d")).select("d.*")


def through_ingest(raw: DataFrame) -> DataFrame:
    """The `$source` step on raw rows, as `pipeline_stages.source` builds it."""
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._connectors.sources.ingest import ingest
    from pipeline_stages.source import _observe_input

    frame = ingest(
        _observe_input(raw),
        time_field=None,
        ts_field="_ts",
        meta_field="_stream_meta",
        operator="SourceOperator",
        problems=ProblemCollector(),
        path="/pipeline/0/$source",
    )
    return frame.df


def ingested(raw: Callable[[int], DataFrame], batch: int) -> DataFrame:
    return through_ingest(raw(batch))


def timed(build: Callable[[], DataFrame], rows: int, tries: int = 5) -> float:
    """`timed_once`, tried again on failure: on a loaded machine Spark gives up on a Python
    worker that takes over 10 s to start (not configurable), failing the query."""
    for attempt in range(1, tries + 1):
        try:
            return timed_once(build(), rows)
        except Exception as error:  # noqa: BLE001 - reported, then tried again
            if attempt == tries:
                raise
            print(f"  (run failed, trying again: {str(error).splitlines()[0][:100]})", flush=True)
    raise AssertionError("unreachable")


def timed_once(query: DataFrame, rows: int) -> float:
    """Rows/s of a query from its start until it has read `rows` rows."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        handle = (
            query.writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            seen = 0
            while seen < rows:
                time.sleep(0.05)
                if handle.exception() is not None:
                    raise RuntimeError(str(handle.exception()))
                seen = sum(p["numInputRows"] for p in handle.recentProgress)
            elapsed = time.perf_counter() - started
        finally:
            handle.stop()
    if seen != rows:
        raise RuntimeError(f"read {seen} rows, expected {rows}")
    return rows / elapsed


def spool_input(data_dir: Path, lines: list[str]) -> None:
    from pipeline_stages._connectors.sources.http_ingest import encode_record
    from pipeline_stages._connectors.sources.spool import Spool

    spool = Spool(data_dir)
    now = int(time.time() * 1000)
    for first in range(0, len(lines), 10_000):
        chunk = lines[first : first + 10_000]
        spool.append("bench", [encode_record(line.encode(), now) for line in chunk])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=120_000)
    parser.add_argument("--batch", type=int, action="append")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--kafka", action="store_true")
    parser.add_argument("--kafka-partitions", type=int, default=2)
    parser.add_argument("--only", action="append", help="run only these sources")
    parser.add_argument(
        "--ingest", action="store_true", help="also through the $source step (parse, stamp)"
    )
    args = parser.parse_args()
    batches = args.batch or [10_000, 120_000]

    from pipeline_stages._connectors.sources import files, http_ingest, kafka
    from pipeline_stages._connectors.sources.register import register_all
    from pipeline_stages._engine.session import build_session

    spark = build_session(
        master=args.master,
        # A loaded machine starts Python workers slowly: wait for them (default 15 s).
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.python.authenticate.socketTimeout": "120s",
        },
        app_name="bench",
    )
    register_all(spark)
    lines = documents(args.rows)
    broker = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_files(root / "source", lines, per_file=max(1, args.rows // 4))
            data_dir = root / "data"
            spool_input(data_dir, lines)
            topic = ""
            if args.kafka:
                from tests.kafka_broker import start

                broker = start()
                topic = broker.create_topic(args.kafka_partitions)
                for p in range(args.kafka_partitions):
                    broker.produce(topic, lines[p :: args.kafka_partitions], partition=p)

            def file_raw(batch: int) -> DataFrame:
                return (
                    spark.readStream.format(files.FORMAT)
                    .option("directory", str(root / "source"))
                    .option("maxRecordsPerBatch", str(batch))
                    .load()
                )

            def http_raw(batch: int) -> DataFrame:
                return (
                    spark.readStream.format(http_ingest.FORMAT)
                    .option("dataDir", str(data_dir))
                    .option("connection", "bench")
                    .option("startSeq", "0")
                    .option("maxRecordsPerBatch", str(batch))
                    .load()
                )

            def kafka_raw(batch: int) -> DataFrame:
                assert broker is not None  # noqa: S101 - only with --kafka
                return (
                    spark.readStream.format(kafka.FORMAT)
                    .option(
                        "clientConfigSecret", json.dumps({"bootstrap.servers": broker.bootstrap})
                    )
                    .option("topics", json.dumps([topic]))
                    .option("startingOffsets", "earliest")
                    .option("maxOffsetsPerTrigger", str(batch))
                    .load()
                )

            results: dict[tuple[str, int], list[float]] = {}
            for batch in batches:
                native_dir = root / f"native-{batch}"
                write_files(native_dir, lines, per_file=batch)
                queries: dict[str, Callable[[], DataFrame]] = {
                    "native": partial(native, spark, native_dir),
                    "file raw": partial(file_raw, batch),
                    "file ingest": partial(ingested, file_raw, batch),
                    "http raw": partial(http_raw, batch),
                    "http ingest": partial(ingested, http_raw, batch),
                }
                if args.kafka:
                    queries["kafka raw"] = partial(kafka_raw, batch)
                    queries["kafka ingest"] = partial(ingested, kafka_raw, batch)
                chosen = {
                    k: v
                    for k, v in queries.items()
                    if k == "native"
                    or (
                        (not args.only or k.split()[0] in args.only) and (args.ingest or "raw" in k)
                    )
                }
                if batch == batches[0]:
                    for build in chosen.values():  # warm-up, discarded (JIT, worker start-up)
                        timed(build, args.rows)
                for run in range(args.runs):
                    for name, build in chosen.items():
                        rate = timed(build, args.rows)
                        results.setdefault((name, batch), []).append(rate)
                        print(
                            f"batch {batch:>7,} run {run} {name:13s} {rate:10,.0f} rows/s",
                            flush=True,
                        )
            print()
            print(f"{args.rows:,} rows, {args.master}, medians of {args.runs}")
            for batch in batches:
                base = statistics.median(results[("native", batch)])
                for (name, size), rates in results.items():
                    if size == batch:
                        median = statistics.median(rates)
                        print(
                            f"batch {batch:>7,} {name:13s} {median:10,.0f} rows/s  "
                            f"{median / base:5.2f}x native"
                        )
    finally:
        if broker is not None:
            from tests.kafka_broker import stop

            stop(broker)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
