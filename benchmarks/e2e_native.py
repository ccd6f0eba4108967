"""The native side of `e2e_throughput.py`: plain Structured Streaming in its own process.

Started by the benchmark as `python benchmarks/e2e_native.py MASTER SHUFFLE_PARTITIONS`. It
builds one SparkSession (Spark's defaults, UI off, UTC, the service's shuffle partition
count) and then answers one JSON command per stdin line with one `RESULT {...}` line on
stdout:

* `{"op": "run", "pipeline", "input", "out", "rows", "trigger"}`: run a pipeline over the
  input directory (one file per micro-batch, `maxFilesPerTrigger=1`) until its progress
  reports count `rows` input rows, i.e. every batch is in the sink; answers the seconds
  from `start()` to then and the batches' `triggerExecution` times;
* `{"op": "start", ...}` / `{"op": "rows"}` / `{"op": "stop"}`: a query left running over a
  directory the benchmark writes to (the latency run), the rows it has read, and its stop
  with its progress reports;
* `{"op": "exit"}`.

Pipelines, the native equivalents of the Sluice pipelines in `e2e_throughput.py`:

* `emit`: `readStream.text` -> `from_json` with the schema -> filter -> select -> JSON
  file sink;
* `merge`: the same rows as JSON text, upserted in a hand-written `foreachBatch` into a
  SQLite table with `executemany` (WAL, `synchronous=FULL`, as Sluice's embedded store);
* `tumbling` / `hopping`: `withWatermark` (3 s) + `window()` aggregation (count/sum/avg;
  `collect_list`/`max_by` over 5 s hops), append mode, the windows upserted into SQLite as
  for `merge` (late rows are dropped by Spark: there is no DLQ);
* `latency`: tumbling 2 s count per key, watermark 0, JSON file sink.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

SCHEMA = "_id BIGINT, seq BIGINT, ts STRUCT<`$date`: TIMESTAMP>, key STRING, v DOUBLE, d BIGINT"
MATCH_MIN = 10.0


def session(master: str, partitions: str) -> SparkSession:
    """Spark's defaults but for the UI, the time zone, the service's partition count and
    the progress reports kept."""
    spark = (
        SparkSession.builder.master(master)
        .appName("native-e2e")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", partitions)
        .config("spark.default.parallelism", partitions)
        # Every report kept, so that a run of more than 100 batches counts all its rows.
        .config("spark.sql.streaming.numRecentProgressUpdates", "100000")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def parsed(spark: SparkSession, directory: str) -> DataFrame:
    """The input lines, one file per micro-batch, parsed with the schema known."""
    row = F.from_json("value", SCHEMA, {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSX"})
    lines = spark.readStream.option("maxFilesPerTrigger", 1).text(directory)
    d = lines.select(row.alias("d")).select("d.*")
    return d.withColumn("ts", F.col("ts.$date"))


def stateless(df: DataFrame) -> DataFrame:
    """`$match` -> `$addFields` -> `$project`."""
    return df.where(F.col("v") >= MATCH_MIN).select(
        "_id", "key", "v", (F.col("v") / F.col("d")).alias("ratio"), (F.col("v") > 50).alias("high")
    )


def windowed(df: DataFrame, pipeline: str) -> DataFrame:
    """The window aggregation, one row per (window, key), as (id, JSON text)."""
    df = df.withWatermark("ts", "3 seconds")
    if pipeline == "tumbling":
        win = F.window("ts", "10 seconds")
        aggs = [F.count("*").alias("n"), F.sum("v").alias("sum"), F.avg("v").alias("avg")]
    else:
        win = F.window("ts", "10 seconds", "5 seconds")
        aggs = [F.collect_list("v").alias("push"), F.max_by("seq", "v").alias("top")]
    out = df.groupBy(win.alias("w"), "key").agg(*aggs)
    start = F.col("w.start")
    doc = F.to_json(
        F.struct(
            F.col("key"),
            start.alias("start"),
            *[F.col(a) for a in ("n", "sum", "avg", "push", "top") if a in out.columns],
        )
    )
    ident = F.concat(F.unix_millis(start).cast("string"), F.lit("/"), F.col("key"))
    return out.select(ident.alias("id"), doc.alias("doc"))


class SqliteUpsert:
    """A `foreachBatch` that upserts `(id, doc)` rows with `executemany`, one transaction
    per batch."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = FULL")
        self.db.execute("CREATE TABLE IF NOT EXISTS docs (id TEXT PRIMARY KEY, doc TEXT)")

    def __call__(self, batch: DataFrame, _batch_id: int) -> None:
        rows = [(str(r[0]), r[1]) for r in batch.collect()]
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT INTO docs (id, doc) VALUES (?, ?) "
            "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc",
            rows,
        )
        self.db.execute("COMMIT")


def query(spark: SparkSession, cmd: dict[str, Any]) -> Any:
    """The started query of a command."""
    out = Path(cmd["out"])
    out.mkdir(parents=True, exist_ok=True)
    df = parsed(spark, cmd["input"])
    pipeline = cmd["pipeline"]
    if pipeline == "emit":
        writer = stateless(df).writeStream.format("json").option("path", str(out / "sink"))
    elif pipeline == "merge":
        docs = stateless(df).select(
            F.col("_id").alias("id"), F.to_json(F.struct("_id", "key", "v", "ratio", "high"))
        )
        writer = docs.writeStream.foreachBatch(SqliteUpsert(str(out / "sink.db")))
    elif pipeline in ("tumbling", "hopping"):
        writer = windowed(df, pipeline).writeStream.foreachBatch(SqliteUpsert(str(out / "sink.db")))
    elif pipeline == "latency":
        agg = df.withWatermark("ts", "0 seconds").groupBy(
            F.window("ts", "2 seconds").alias("w"), "key"
        )
        agg = agg.agg(F.count("*").alias("n")).select(F.col("w.start").alias("start"), "key", "n")
        writer = agg.writeStream.format("json").option("path", str(out / "sink"))
    else:
        raise ValueError(f"unknown pipeline {pipeline!r}")
    writer = writer.option("checkpointLocation", str(out / "checkpoint"))
    if cmd.get("trigger"):
        writer = writer.trigger(processingTime=cmd["trigger"])
    return writer.start()


class Progress:
    """A query's progress reports, read as they arrive.

    `StreamingQuery.recentProgress` converts every kept report through py4j on each call
    (two round trips a report), and the benchmark polls every 50 ms: with dozens of batches
    that polling cost native's driver more CPU than its query (and Spark keeps only the last
    100 reports by default, so a longer run never counted all its rows). Here each poll
    converts only the reports that are new, and the session keeps them all
    (`spark.sql.streaming.numRecentProgressUpdates`, `session`)."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.reports: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        """Every report so far."""
        kept = self.handle._jsq.recentProgress()
        for index in range(len(self.reports), len(kept)):
            self.reports.append(json.loads(kept[index].json()))
        return self.reports

    def rows(self) -> int:
        """Input rows of every batch so far."""
        return sum(p["numInputRows"] for p in self.poll())


def progress_of(progress: Progress) -> list[dict[str, Any]]:
    """Per batch: input rows and `triggerExecution` ms."""
    return [
        {
            "rows": p["numInputRows"],
            "ms": p["durationMs"].get("triggerExecution", 0),
            "phases": {k: v for k, v in p["durationMs"].items() if k != "triggerExecution"},
        }
        for p in progress.poll()
    ]


def run(spark: SparkSession, cmd: dict[str, Any]) -> dict[str, Any]:
    """Run a pipeline until every input row is through its sink."""
    started = time.monotonic()
    first, first_rows = None, 0
    handle = query(spark, cmd)
    progress = Progress(handle)
    try:
        while True:
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
            rows = progress.rows()
            if rows and first is None:
                first, first_rows = time.monotonic() - started, rows
            if rows >= cmd["rows"]:
                break
            time.sleep(0.05)
        seconds = time.monotonic() - started
        return {
            "seconds": seconds,
            "first": first or seconds,
            "first_rows": first_rows,
            "batches": progress_of(progress),
        }
    finally:
        handle.stop()


def main() -> None:
    spark = session(sys.argv[1], sys.argv[2])
    running: Progress | None = None
    print("RESULT " + json.dumps({"ready": True}), flush=True)
    for raw in sys.stdin:
        cmd = json.loads(raw)
        op = cmd["op"]
        if op == "exit":
            break
        if op == "run":
            result: dict[str, Any] = run(spark, cmd)
        elif op == "start":
            running = Progress(query(spark, cmd))
            result = {"started": True}
        elif op == "rows" and running is not None:
            result = {"rows": running.rows()}
        elif op == "stop" and running is not None:
            result = {"batches": progress_of(running)}
            running.handle.stop()
            running = None
        else:
            result = {"error": f"bad command {cmd!r}"}
        print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
