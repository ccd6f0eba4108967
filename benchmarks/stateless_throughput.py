"""Stateless throughput: Sluice's compiled `$match` + `$addFields` + `$project` vs hand-written PySpark.

Both sides read the same JSON-lines files with Spark's native text file source, one file per
micro-batch, in the same process and JVM, and write every output column to Spark's `noop`
sink (so no projection is pruned away). The baseline knows the schema up front and uses typed
columns; Sluice parses schemaless documents into VARIANT and evaluates MQL natively, with
per-document error capture (the DLQ path) included.

    python benchmarks/stateless_throughput.py [--rows 400000] [--files 8] [--runs 3]

Prints documents/s per run, the medians, and the ratio Sluice / baseline.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

PIPELINE: list[dict[str, Any]] = [
    {"$source": {"documents": []}},
    {"$match": {"status": "ok", "reading": {"$gte": 10}}},
    {"$addFields": {"watts": {"$multiply": ["$reading", 1.5]}, "site": {"$toUpper": "$site"}}},
    {"$project": {"_id": 0, "device": 1, "site": 1, "watts": 1, "_ts": 1}},
]


def write_input(directory: Path, *, rows: int, files: int) -> None:
    """JSON-lines files of sensor-like documents (about 80 % pass the filter)."""
    rng = random.Random(7)
    per_file = rows // files
    for index in range(files):
        with (directory / f"part-{index:04d}.json").open("w") as handle:
            for n in range(per_file):
                doc = {
                    "device": f"d{rng.randrange(1000)}",
                    "site": rng.choice(["north", "south", "east"]),
                    "status": "ok" if rng.random() < 0.9 else "fault",
                    "reading": rng.randrange(0, 100),
                    "seq": index * per_file + n,
                }
                handle.write(json.dumps(doc) + "\n")


def text_stream(spark: SparkSession, directory: Path) -> DataFrame:
    return spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))


def baseline_query(spark: SparkSession, directory: Path) -> DataFrame:
    """The same query written directly in PySpark, with the schema known."""
    schema = "device STRING, site STRING, status STRING, reading BIGINT, seq BIGINT"
    docs = (
        text_stream(spark, directory).select(F.from_json("value", schema).alias("d")).select("d.*")
    )
    return (
        docs.where((F.col("status") == "ok") & (F.col("reading") >= 10))
        .withColumn("watts", F.col("reading") * 1.5)
        .withColumn("site", F.upper("site"))
        .select(F.to_json(F.struct("device", "site", "watts")).alias("doc"))
    )


def sluice_query(spark: SparkSession, directory: Path) -> DataFrame:
    """Sluice's compiled stages over the same files (the source stage reads text lines)."""
    from pipeline_stages import parse_pipeline
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._connectors.sources.ingest import ingest
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.envelope import envelope_from_frame

    parsed = parse_pipeline(PIPELINE)
    ctx = CompileContext(spark=spark, processor_name="bench", problems=ProblemCollector())
    raw = text_stream(spark, directory).select(
        F.lit(0).alias("part"),
        F.lit(0).cast("bigint").alias("seq"),
        F.col("value").alias("raw"),
        F.lit(0).cast("bigint").alias("source_ts_ms"),
        F.lit('{"type":"file"}').alias("meta"),
    )
    frame = ingest(
        raw,
        time_field=None,
        ts_field="_ts",
        meta_field="_stream_meta",
        operator="SourceOperator",
        problems=ctx.problems,
        path="/pipeline/0/$source",
    )
    for stage in parsed.stages[1:]:
        frame = _compile(stage, frame, ctx)
    ctx.problems.raise_if_any()
    return envelope_from_frame(frame)


def _compile(stage: Any, frame: Any, ctx: Any) -> Any:
    from pipeline_stages import REGISTRY

    return REGISTRY[stage.key].module.compile(stage.spec, frame, ctx, stage.path)


def timed_run(query: DataFrame, *, rows: int) -> tuple[float, float]:
    """(end-to-end docs/s from start, steady-state docs/s over batches after the first).

    The first micro-batch of a query pays for planning and JIT-compiling its generated code;
    the steady-state figure is rows / summed `triggerExecution` of the later batches.
    """
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        handle = (
            query.writeStream.foreachBatch(
                lambda df, _: df.write.format("noop").mode("overwrite").save()
            )
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="0 seconds")
            .start()
        )
        seen = 0
        while seen < rows:
            handle.awaitTermination(0.05)
            seen = sum(p["numInputRows"] for p in handle.recentProgress)
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
        elapsed = time.perf_counter() - started
        batches = [p for p in handle.recentProgress if p["numInputRows"]]
        handle.stop()
    later = batches[1:]
    steady_ms = sum(p["durationMs"]["triggerExecution"] for p in later)
    steady = sum(p["numInputRows"] for p in later) / (steady_ms / 1000) if steady_ms else 0.0
    return rows / elapsed, steady


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pipeline_stages._engine.session import build_session

    spark = build_session(
        master=args.master, conf={"spark.sql.shuffle.partitions": "2"}, app_name="bench"
    )
    with tempfile.TemporaryDirectory() as data:
        directory = Path(data)
        write_input(directory, rows=args.rows, files=args.files)
        rows = args.rows // args.files * args.files
        # One warm-up of each, discarded: the first queries pay for JIT compilation.
        timed_run(baseline_query(spark, directory), rows=rows)
        timed_run(sluice_query(spark, directory), rows=rows)
        results: dict[str, list[tuple[float, float]]] = {"baseline": [], "sluice": []}
        for _ in range(args.runs):
            for name, build in (("baseline", baseline_query), ("sluice", sluice_query)):
                e2e, steady = timed_run(build(spark, directory), rows=rows)
                results[name].append((e2e, steady))
                print(f"{name:9s} end-to-end {e2e:10,.0f} docs/s  steady {steady:10,.0f} docs/s")
    for label, index in (("end-to-end", 0), ("steady-state", 1)):
        base = statistics.median(r[index] for r in results["baseline"])
        ours = statistics.median(r[index] for r in results["sluice"])
        print(
            f"median {label:12s} baseline {base:10,.0f} docs/s; sluice {ours:10,.0f} docs/s; "
            f"ratio {ours / base:.2f}"
        )
    print(f"({rows:,} docs, {args.files} micro-batches, {args.master}, {args.runs} runs each)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
