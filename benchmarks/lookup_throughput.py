"""`$lookup` enrichment throughput, and `$cachedLookup`'s hit rate and speed-up on skewed keys.

Three queries read the same JSON-lines files (Spark's text source, one file per micro-batch)
and write every output to Spark's `noop` sink, in one process and JVM:

* baseline: `$set` only (the same pipeline without the lookup);
* `$lookup` of every document's `sku` against a `local` (SQLite) collection of `--foreign`
  documents by `_id` (one batched `$in` per partition, through the `_id` index);
* `$cachedLookup` of the same, with a one-hour TTL.

The keys follow a Zipf-like distribution (`--skew`), so a few products are most of the
lookups. The hit rate is measured by counting the keys the executors actually asked the store
for (a counting wrapper around the store opener writes them to a file), against the keys the
documents needed.

    python benchmarks/lookup_throughput.py [--rows 1000000] [--foreign 100000] [--files 10]

Prints documents/s per query (end to end and steady state), the ratios against the baseline,
and the cache's hit rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FROM = {"connectionName": "local", "db": "shop", "coll": "products"}
BASE = [{"$source": {"documents": []}}, {"$set": {"seen": True}}]
LOOKUP = [
    *BASE,
    {"$lookup": {"from": FROM, "localField": "sku", "foreignField": "_id", "as": "product"}},
]
CACHED = [
    *BASE,
    {
        "$cachedLookup": {
            "ttl": {"size": 1, "unit": "hour"},
            "maxMemUsageBytes": 256_000_000,
            "from": FROM,
            "localField": "sku",
            "foreignField": "_id",
            "as": "product",
        }
    },
]


def zipf_keys(rng: random.Random, count: int, foreign: int, skew: float) -> list[int]:
    weights = [1 / (rank**skew) for rank in range(1, foreign + 1)]
    return rng.choices(range(foreign), weights=weights, k=count)


def write_input(directory: Path, *, rows: int, files: int, foreign: int, skew: float) -> None:
    rng = random.Random(11)
    keys = zipf_keys(rng, rows, foreign, skew)
    per_file = rows // files
    for index in range(files):
        with (directory / f"part-{index:04d}.json").open("w") as handle:
            for n in range(index * per_file, (index + 1) * per_file):
                handle.write(json.dumps({"order": n, "sku": keys[n], "qty": n % 7}) + "\n")


def seed_store(path: Path, foreign: int) -> None:
    from service.stores.secrets import SecretBox
    from service.stores.sqlite import SqliteStores

    stores = SqliteStores(str(path), secrets=SecretBox.load(data_dir=path.parent))
    docs = [{"_id": i, "name": f"product {i}", "price": i % 100 + 0.5} for i in range(foreign)]
    for start in range(0, foreign, 10_000):
        stores.documents.merge("shop", "products", docs[start : start + 10_000])
    stores.close()


@dataclass(frozen=True)
class CountingOpener:
    """The run's opener, counting the keys each store query asks for (in `log`)."""

    inner: Any
    log: str

    def __call__(self, connection: str) -> Any:
        return _Counting(self.inner(connection), self.log)


class _Counting:
    def __init__(self, store: Any, log: str) -> None:
        self._store, self._log = store, log

    def find_by_keys(self, db: str, coll: str, field: str, keys: Any) -> Any:
        with open(self._log, "a") as handle:
            handle.write(f"{len(keys)}\n")
        return self._store.find_by_keys(db, coll, field, keys)


def query(spark: SparkSession, directory: Path, pipeline: list[Any], opener: Any) -> DataFrame:
    from pipeline_stages import REGISTRY, parse_pipeline
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._connectors.sources.ingest import ingest
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.envelope import envelope_from_frame

    parsed = parse_pipeline(pipeline)
    ctx = CompileContext(
        spark=spark, processor_name="bench", problems=ProblemCollector(), lookup_stores=opener
    )
    raw = (
        spark.readStream.option("maxFilesPerTrigger", 1)
        .text(str(directory))
        .select(
            F.lit(0).alias("part"),
            F.get_json_object("value", "$.order").cast("bigint").alias("seq"),
            F.col("value").alias("raw"),
            F.lit(0).cast("bigint").alias("source_ts_ms"),
            F.lit('{"type":"file"}').alias("meta"),
        )
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
        frame = REGISTRY[stage.key].module.compile(stage.spec, frame, ctx, stage.path)
    ctx.problems.raise_if_any()
    return envelope_from_frame(frame)


def timed_run(df: DataFrame, *, rows: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        handle = (
            df.writeStream.foreachBatch(
                lambda batch, _: batch.write.format("noop").mode("overwrite").save()
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
    parser.add_argument("--foreign", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--skew", type=float, default=1.1)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    from pipeline_stages._engine.session import build_session
    from service.runtime.lookup_stores import StoreLookupOpener

    spark = build_session(
        master=args.master,
        app_name="lookup-bench",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
    )
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        for name in ("input", "logs"):
            (root / name).mkdir()
        write_input(
            root / "input", rows=args.rows, files=args.files, foreign=args.foreign, skew=args.skew
        )
        db = root / "store" / "sluice.db"
        db.parent.mkdir()
        seed_store(db, args.foreign)
        inner = StoreLookupOpener(f"sqlite:///{db}")
        rows = args.rows // args.files * args.files
        distinct_per_file = []
        for path in sorted((root / "input").iterdir()):
            skus = {json.loads(line)["sku"] for line in path.open()}
            distinct_per_file.append(len(skus))
        print(f"rows={rows} foreign={args.foreign} files={args.files} skew={args.skew}")
        results: dict[str, tuple[float, float]] = {}
        for name, pipeline in (("baseline", BASE), ("lookup", LOOKUP), ("cachedLookup", CACHED)):
            log = str(root / "logs" / f"{name}.log")
            opener = CountingOpener(inner, log)
            results[name] = timed_run(query(spark, root / "input", pipeline, opener), rows=rows)
            asked = sum(int(x) for x in open(log)) if os.path.exists(log) else 0
            print(
                f"{name:13s} end-to-end {results[name][0]:10.0f} docs/s   "
                f"steady {results[name][1]:10.0f} docs/s   store keys asked {asked}"
            )
            if name == "cachedLookup":
                needed = sum(distinct_per_file)
                print(
                    f"cache: keys needed (distinct per micro-batch, summed) {needed}, asked {asked}, "
                    f"hit rate {1 - asked / needed:.3f}"
                )
        base_e2e, base_steady = results["baseline"]
        for name in ("lookup", "cachedLookup"):
            e2e, steady = results[name]
            print(
                f"ratio {name}/baseline: end-to-end {e2e / base_e2e:.3f}, "
                f"steady {steady / base_steady:.3f}"
            )
        lk, cl = results["lookup"], results["cachedLookup"]
        print(
            f"speed-up cachedLookup/lookup: end-to-end {cl[0] / lk[0]:.3f}, steady {cl[1] / lk[1]:.3f}"
        )
    spark.stop()


if __name__ == "__main__":
    main()
