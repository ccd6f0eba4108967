"""Window throughput: Sluice's window operator vs Spark's native `window()` aggregation.

Both read the same parquet files (event time, key, value, id), one file per micro-batch, in
the same process and JVM, with the same allowed lateness (Spark: `withWatermark` delay). The
native query is `groupBy(window(ts), key).agg(...)` in append mode. Sluice builds documents
(VARIANT) from the same columns and runs the compiled window stage: per-document lateness with
late rows to the DLQ (the DLQ is on), `$group` inputs compiled natively, state in the
operator. Both write to a `foreachBatch` sink that collects the emitted windows.

What the comparison charges Sluice for, beyond native: building the VARIANT documents (the
source's work in Sluice's document model: `to_variant_object`, the `_ts` date), typing the
`$group` inputs out of them, the DLQ's copy of each healthy document (`to_json`, lateness is
only known in the operator), the shuffle of those compact rows to the operator's bucket(s),
Arrow to the Python worker, and the operator itself. Native pre-aggregates before its shuffle
and drops late rows silently.

Inputs (`--input`):
* `typed` (default): parquet files with typed columns; Sluice builds each document with
  `to_variant_object` (a stand-in for a source), native aggregates the columns directly;
* `json`: the same rows as JSON-lines text files (`{"seq", "ts": {"$date"}, "key", "v",
  "id"}`), what Sluice's sources deliver. Sluice reads them through its real source path
  (`pipeline_stages._connectors.sources.ingest`: parse, `timeField: "$ts"`, `_ts`/`_stream_meta`
  projection, the DLQ for bad records), with the file source's per-line metadata (path and
  line), native with `from_json` and the schema known.

Workloads:
* `tumbling`: 10 s tumbling windows, `$sum`, `$avg`, `$count` per key;
* `hopping`: 10 s windows every 5 s, `$push` and `$top` per key (`collect_list`, `max_by`).

    python benchmarks/window_throughput.py [--rows 1000000] [--files 8] [--keys 1000] [--runs 3]
        [--buckets 1,2] [--input typed|json] [--no-batch-engine] [--ceiling]

`--buckets` lists the operator's bucket counts to measure: 1 runs every window in one Python
worker; P > 1 splits the `$group` groups over P workers with the same results (every bucket
also gets every other bucket's rows as shadows without content; see
`pipeline_stages/_windowing/spark/compile.py`). `sluice/batch` is
the batch window engine (`spark.sluice.window.engine=batch`, `batch.engine.py`), which runs
in the sink's `foreachBatch` (`ForeachBatchSink`, as the service runs it: each batch folds in
the background while Spark reads the next, `batch.pipelining`); `--no-batch-engine`
leaves it out, `--sync-batch-engine` adds it folding each batch before returning, and
`--stamped-batch-engine` adds it reading stamped documents (see `spark.unstamped`);
`--stamped-operator` adds the operator (one bucket) reading stamped documents.

`--ceiling` adds two runs of the operator's design with the operator's work taken out (one
bucket): `sluice/no-op` ships exactly the operator's input (every column it reads, the late
copies as text) to an `applyInPandasWithState` function that reads its frames and emits
nothing, and `sluice/no-op-no-copies` does the same without the late copies (which the DLQ
needs). They bound what any operator logic in this design can reach: the source path, the
shuffle of every row to the operator, the sort Spark puts before it and Arrow to pandas.

Data: event time advances 1 ms per row with U(0, 3 s) disorder; 0.1 % of the rows are 120 s
late. Each run is timed from the query's start until every row has been read (and folded,
for the batch engine); the windows
are counted once the query has drained (native closes its last windows in a micro-batch
without input, which is not timed). Prints rows/s per run and the medians, the ratio Sluice /
native, and the latency from the micro-batch holding a window's closing record to the
micro-batch emitting the window.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

BASE_MS = 1_704_067_200_000
INTERVAL_MS = 10_000
HOP_MS = 5_000
LATENESS_MS = 3_000
SCHEMA = "seq BIGINT, ts TIMESTAMP, key STRING, v DOUBLE, id BIGINT"
WINDOW_START = re.compile(r'"window":\{"start":\{"\$date":"([^"]+)"')


def write_input(
    directory: Path, *, rows: int, files: int, keys: int, fmt: str = "typed"
) -> np.ndarray:
    """Parquet (`typed`) or JSON-lines (`json`) files in arrival order; returns the event
    times (ms) in arrival order."""
    rng = np.random.default_rng(7)
    seq = np.arange(rows, dtype=np.int64)
    ts = BASE_MS + seq - rng.integers(0, 3000, rows)
    late = rng.random(rows) < 0.001
    ts[late] -= 120_000
    key = np.array([f"k{n}" for n in range(keys)])[rng.integers(0, keys, rows)]
    v = np.round(rng.random(rows) * 100, 2)
    per_file = rows // files
    if fmt != "json":
        write_parquet(directory, files=files, seq=seq, ts=ts, key=key, v=v)
        return ts[: per_file * files]
    for index in range(files):
        part = slice(index * per_file, (index + 1) * per_file)
        iso = np.datetime_as_string(ts[part].astype("datetime64[ms]"), unit="ms")
        lines = [
            json.dumps({"seq": q, "ts": {"$date": f"{t}Z"}, "key": k, "v": x, "id": q})
            for q, t, k, x in zip(
                seq[part].tolist(), iso.tolist(), key[part].tolist(), v[part].tolist(),
                strict=True,
            )
        ]  # fmt: skip
        assert all(line.startswith('{"seq": ') for line in lines)  # see `json_frame`
        (directory / f"part-{index:04d}.json").write_text("\n".join(lines) + "\n")
        time.sleep(0.01)  # distinct modification times keep the file order
    return ts[: per_file * files]


def write_parquet(
    directory: Path,
    *,
    files: int,
    seq: np.ndarray,
    ts: np.ndarray,
    key: np.ndarray,
    v: np.ndarray,
) -> None:
    """The rows (`SCHEMA`, `id` = `seq`) in `files` parquet files, in arrival order."""
    per_file = len(seq) // files
    for index in range(files):
        part = slice(index * per_file, (index + 1) * per_file)
        table = pa.table(
            {
                "seq": seq[part],
                "ts": pa.array(ts[part], type=pa.timestamp("ms", tz="UTC")),
                "key": key[part],
                "v": v[part],
                "id": seq[part],
            }
        )
        pq.write_table(table, directory / f"part-{index:04d}.parquet")
        time.sleep(0.01)  # distinct modification times keep the file order


def stream(spark: SparkSession, directory: Path, fmt: str = "typed") -> DataFrame:
    """The input rows (`SCHEMA`) one file per micro-batch; `json` parses them natively."""
    reader = spark.readStream.option("maxFilesPerTrigger", 1)
    if fmt == "typed":
        return reader.schema(SCHEMA).parquet(str(directory))
    schema = "seq BIGINT, ts STRUCT<`$date`: TIMESTAMP>, key STRING, v DOUBLE, id BIGINT"
    row = F.from_json("value", schema, {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSX"})
    parsed = reader.text(str(directory)).select(row.alias("d"))
    return parsed.select("d.seq", F.col("d.ts.$date").alias("ts"), "d.key", "d.v", "d.id")


# --------------------------------------------------------------------------- native


def native_query(
    spark: SparkSession, directory: Path, workload: str, fmt: str = "typed"
) -> DataFrame:
    """`window()` aggregation in append mode (late rows are dropped silently)."""
    df = stream(spark, directory, fmt).withWatermark("ts", f"{LATENESS_MS // 1000} seconds")
    if workload == "tumbling":
        win = F.window("ts", f"{INTERVAL_MS // 1000} seconds")
        aggs = [F.sum("v").alias("sum"), F.avg("v").alias("avg"), F.count("*").alias("n")]
    else:
        win = F.window("ts", f"{INTERVAL_MS // 1000} seconds", f"{HOP_MS // 1000} seconds")
        aggs = [F.collect_list("v").alias("push"), F.max_by("id", "v").alias("top")]
    out = df.groupBy(win.alias("w"), "key").agg(*aggs)
    return out.select(
        F.unix_millis(F.col("w.start")).alias("window_start"), F.col("key").alias("window_key")
    )


# --------------------------------------------------------------------------- sluice


def window_stage(workload: str) -> dict[str, Any]:
    lateness = {"size": LATENESS_MS, "unit": "ms"}
    if workload == "tumbling":
        group = {"_id": "$key", "sum": {"$sum": "$v"}, "avg": {"$avg": "$v"}, "n": {"$count": {}}}
        return {
            "$tumblingWindow": {
                "interval": {"size": INTERVAL_MS, "unit": "ms"},
                "allowedLateness": lateness,
                "pipeline": [{"$group": group}],
            }
        }
    group = {
        "_id": "$key",
        "push": {"$push": "$v"},
        "top": {"$top": {"sortBy": {"v": -1}, "output": "$id"}},
    }
    return {
        "$hoppingWindow": {
            "interval": {"size": INTERVAL_MS, "unit": "ms"},
            "hopSize": {"size": HOP_MS, "unit": "ms"},
            "allowedLateness": lateness,
            "pipeline": [{"$group": group}],
        }
    }


#: The shuffle partitions each compiled Sluice window query starts with, as the service starts
#: it (`CompiledPipeline.state_partitions`: one for one bucket, spread so that P buckets run in
#: P tasks); `run_once` passes them to `start_query`.
STATE_PARTITIONS: weakref.WeakKeyDictionary[DataFrame, int] = weakref.WeakKeyDictionary()


def sluice_query(
    spark: SparkSession,
    directory: Path,
    workload: str,
    buckets: int = 1,
    fmt: str = "typed",
    engine: str = "operator",
    unstamped: bool = True,
) -> Any:
    """The compiled window stage over documents built from the same columns (`typed`) or
    read from the JSON lines by the source path (`json`): the envelopes' frame, or with
    `engine="batch"` a `(input frame, BatchWindow)` pair (the engine runs in the sink).
    `unstamped=False` hides the source's unstamped documents from the window."""
    from pipeline_stages import parse_stage
    from pipeline_stages._base import ProblemCollector
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._windowing.runtime.config import WindowSource
    from pipeline_stages._windowing.spark.compile import BUCKETS_CONF

    ctx = CompileContext(spark=spark, processor_name="bench", problems=ProblemCollector())
    if fmt == "json":
        frame = json_frame(spark, directory, ctx)
    else:
        frame = typed_frame(spark, directory)
    if not unstamped:
        frame = type(frame)(frame.df)
    ctx.has_dlq = True
    ctx.window_source = WindowSource(partitions=1)  # type: ignore[attr-defined]
    spark.conf.set(BUCKETS_CONF, str(buckets))
    spark.conf.set("spark.sluice.window.engine", engine)
    stage = parse_stage(window_stage(workload), path="/pipeline/1")
    try:
        plan = stage.entry.module.compile(stage.spec, frame, ctx, stage.path)
    finally:
        spark.conf.unset("spark.sluice.window.engine")
    ctx.problems.raise_if_any()
    if engine == "batch":
        if plan.batch is None:
            raise RuntimeError("the batch engine does not run this window")
        return plan.batch.compact, plan.batch
    frame = plan.envelopes.select("kind", "window_start", "window_key")
    STATE_PARTITIONS[frame] = plan.state_partitions
    return frame


def ceiling_query(
    spark: SparkSession, directory: Path, workload: str, fmt: str, copies: bool
) -> Any:
    """`sluice_query` (one bucket) with the operator replaced by one that does no work, and
    with `copies=False` without the late copies (`C.ORIG`, `C.OMETA` shipped as NULL)."""
    from pipeline_stages._windowing.runtime import config as C
    from pipeline_stages._windowing.spark import compile as window_compile

    def no_op(_spec: Any, _stamp: Any = None) -> Any:
        def operate(_key: Any, pdfs: Any, state: Any) -> Any:
            for _ in pdfs:  # the frames are built as for the real operator
                pass
            # No timeout: the operator of a window without wall-clock rules has none.
            state.update((b"",))
            return iter(())

        return operate

    real_operator = window_compile._operator

    def without_copies(
        shipped: tuple[Any, list[str]], spec: Any, stamp: Any, **options: Any
    ) -> Any:
        df, columns = shipped
        for name in (C.ORIG, C.OMETA):
            if name in df.columns:
                df = df.withColumn(name, F.lit(None).cast(df.schema[name].dataType))
        return real_operator((df, columns), spec, stamp, **options)

    with mock.patch.object(window_compile, "make_operator", no_op):
        if copies:
            return sluice_query(spark, directory, workload, 1, fmt)
        with mock.patch.object(window_compile, "_operator", without_copies):
            return sluice_query(spark, directory, workload, 1, fmt)


def json_frame(spark: SparkSession, directory: Path, ctx: Any) -> Any:
    """The JSON lines through Sluice's source path, `timeField: "$ts"` (see `ingest`)."""
    from pipeline_stages._connectors.sources.ingest import ingest

    raw = spark.readStream.option("maxFilesPerTrigger", 1).text(str(directory))
    # The arrival order, which Sluice's sources count as they read (the file source numbers
    # lines, Kafka has offsets): cut from each line's fixed `{"seq": <n>, ` prefix here, as
    # cheap as counting. Parsing it out with `get_json_object` cost ~0.15 s per 125k-line
    # batch, charged to Sluice only (`benchmarks/RESULTS.md`). `write_input` writes the prefix.
    seq = F.substring_index(F.substring("value", 9, 24), ",", 1).cast("bigint")
    # The file source's metadata (`sources.files`): its path and line differ per document, so
    # Spark cannot fold the metadata's parsing into a constant, as it would for one literal.
    meta = F.concat(F.lit('{"type": "file", "path": "events.json", "line": '), seq + 1, F.lit("}"))
    raw = raw.select(
        F.lit(0).alias("part"),
        seq.alias("seq"),
        F.col("value").alias("raw"),
        F.lit(0).cast("bigint").alias("source_ts_ms"),
        meta.alias("meta"),
    )
    return ingest(
        raw,
        time_field="$ts",
        ts_field="_ts",
        meta_field="_stream_meta",
        operator="SourceOperator",
        problems=ctx.problems,
        path="/pipeline/0/$source",
    )


def typed_frame(spark: SparkSession, directory: Path) -> Any:
    """Documents built with `to_variant_object` from the parquet columns, stamped with `_ts`
    and `_stream_meta` as a source stamps them, and unstamped (`StreamFrame.unstamped`)."""
    from pipeline_stages._mql import values as V
    from pipeline_stages._stream import frame as fr

    source = stream(spark, directory)
    event_ms = F.unix_millis("ts")
    meta = F.parse_json(F.lit('{"source":{"type":"generated"}}'))
    fields = [F.lit("key"), F.col("key"), F.lit("v"), F.col("v"), F.lit("id"), F.col("id")]
    stamp = [F.lit("_ts"), V.from_epoch_ms(event_ms), F.lit("_stream_meta"), meta]

    def documents(doc: Any) -> DataFrame:
        return source.select(
            F.lit(0).alias(fr.PART),
            F.col("seq").alias(fr.SEQ),
            F.lit(0).cast("bigint").alias(fr.SUB),
            event_ms.alias(fr.EVENT_MS),
            doc.alias(fr.DOC),
            meta.alias(fr.META),
            F.lit(None).cast("string").alias(fr.DLQ_REASON),
            F.lit(None).cast("string").alias(fr.DLQ_OPERATOR),
            F.lit(fr.KIND_OUTPUT).alias(fr.KIND),
            F.lit(None).cast("string").alias(fr.MISSED),
            F.lit(None).cast("bigint").alias(fr.WINDOW_START),
            F.lit(None).cast("string").alias(fr.WINDOW_KEY),
        )

    stamped = documents(F.to_variant_object(F.named_struct(*fields, *stamp)))
    unstamped = documents(F.to_variant_object(F.named_struct(*fields)))
    return fr.StreamFrame(stamped, unstamped=fr.Unstamped(unstamped, "_ts", "_stream_meta"))


# --------------------------------------------------------------------------- running


def local_session(app_name: str) -> SparkSession:
    """The window benchmarks' session: both cores, two shuffle partitions."""
    from pipeline_stages._engine.session import build_session

    conf = {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"}
    return build_session(master="local[2]", app_name=app_name, conf=conf)


@dataclass
class Run:
    """One measured run."""

    rows_per_s: float
    windows: int
    dlq: int
    latencies_ms: list[float] = field(default_factory=list)


def closing_batches(ts: np.ndarray, files: int, hop_ms: int) -> dict[int, int]:
    """Window end -> index of the micro-batch whose record first closes it (§4.3)."""
    per_file = len(ts) // files
    watermark = np.maximum.accumulate(ts) - 1 - LATENESS_MS
    ends = np.arange((ts.min() // hop_ms) * hop_ms, ts.max() + 2 * hop_ms, hop_ms)
    first = np.searchsorted(watermark, ends, side="left")
    return {int(e): int(i) // per_file for e, i in zip(ends, first, strict=True) if i < len(ts)}


def window_start_ms(doc_json: str) -> int:
    """A window result's `_stream_meta.window.start`, in ms."""
    found = WINDOW_START.search(doc_json)
    if found is None:
        raise ValueError(f"no window start in {doc_json}")
    return int(datetime.fromisoformat(found.group(1)).timestamp() * 1000)


def run_once(
    query: Any,
    *,
    rows: int,
    closing: dict[int, int],
    idle_batches: bool = False,
    pipelined: bool = True,
) -> Run:
    """Run `query` (a frame, or a batch engine's `(frame, BatchWindow)`) over the input;
    the batch engine runs in the sink the service uses, `pipelined` or not.

    Sluice's queries start as the service starts them (`session.start_query`): a window
    without a wall-clock rule runs no micro-batch without input. Native needs those
    (`idle_batches=True`) to emit the windows its last watermark closes."""
    from pipeline_stages._engine.session import start_query
    from pipeline_stages._engine.sink import ForeachBatchSink

    batch_done: dict[int, float] = {}
    emitted: dict[int, list[int]] = {}
    counts = {"out": 0, "dlq": 0}
    window = None
    if isinstance(query, tuple):
        query, window = query
        window.bind(tempfile.mkdtemp(prefix="sluice-bench-state-"))

    def collect(batch: DataFrame, batch_id: int) -> None:
        kinds = batch.columns[0] == "kind"
        for row in batch.collect():
            kind = row["kind"] if kinds else "out"
            if kind in counts:
                counts[kind] += 1
            if kind == "out":
                emitted.setdefault(batch_id, []).append(int(row["window_start"]))
        batch_done[batch_id] = time.monotonic()

    class Counter:
        """The batch engine's writer: counts, and reads each result's window start."""

        def write(self, batch: Any) -> None:
            counts["out"] += len(batch.outputs)
            counts["dlq"] += len(batch.dlq)
            emitted[batch.batch_id] = [window_start_ms(o.doc_json) for o in batch.outputs]
            batch_done[batch.batch_id] = time.monotonic()

    sink: Any = collect
    if window is not None:  # as the service runs it (`ForeachBatchSink`)
        sink = ForeachBatchSink(Counter(), processor="bench", window=window, pipelined=pipelined)
    checkpoint = tempfile.mkdtemp(prefix="sluice-bench-")
    started = time.monotonic()
    handle = query.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
    handle = handle.trigger(processingTime="0 seconds")
    handle = start_query(
        handle,
        query.sparkSession,
        idle_batches=idle_batches,
        state_partitions=STATE_PARTITIONS.get(query),
    )
    try:
        while True:
            progress = handle.recentProgress
            done = sum(p["numInputRows"] for p in progress)
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
            if not handle.isActive:  # a JVM Error (e.g. StackOverflowError) sets no exception
                raise RuntimeError(f"the query stopped after {done:,} of {rows:,} rows")
            if done >= rows:
                break
            time.sleep(0.05)
        if window is not None:
            sink.flush()  # the last batch's fold
        elapsed = time.monotonic() - started
        # Untimed: native emits the windows its last watermark closes in a micro-batch without
        # input after the last file, a one-off cost of a finite input (a data batch would emit
        # them in a continuous stream). Waiting for it makes the window count whole (a fixed
        # 0.5 s wait sometimes missed it: 87,884 windows instead of 99,883).
        drained(handle)
    finally:
        handle.stop()
        if window is not None:
            sink.close()
    size = INTERVAL_MS
    latencies = []
    order = sorted(batch_done)
    for batch_id, starts in emitted.items():
        for start in starts:
            closing_batch = closing.get(start + size)
            if closing_batch is None or closing_batch >= len(order):
                continue
            previous = batch_done.get(closing_batch - 1, started)
            latencies.append((batch_done[batch_id] - previous) * 1000)
    return Run(rows / elapsed, counts["out"], counts["dlq"], latencies)


def drained(handle: Any, timeout_s: float = 120.0) -> None:
    """Return once the query waits for new input: no batch running, none due (Spark runs a
    micro-batch without input while its watermark still has windows to close)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = handle.status  # one snapshot: both fields from the same moment
        if status["message"] == "Waiting for data to arrive" and not status["isTriggerActive"]:
            return
        if handle.exception() is not None:
            raise RuntimeError(str(handle.exception()))
        if time.monotonic() > deadline:
            raise RuntimeError(f"the query did not drain: {status}")
        time.sleep(0.02)


def summary(name: str, runs: list[Run]) -> float:
    rates = [r.rows_per_s for r in runs]
    lat = sorted(x for r in runs for x in r.latencies_ms)
    median = statistics.median(rates)
    p50 = statistics.median(lat) if lat else float("nan")
    p95 = lat[int(0.95 * (len(lat) - 1))] if lat else float("nan")
    print(
        f"  {name:<10} median {median:>10,.0f} rows/s   runs "
        + " / ".join(f"{r:,.0f}" for r in rates)
        + f"   windows {runs[-1].windows:,}  dlq {runs[-1].dlq:,}"
        + f"   latency p50 {p50:,.0f} ms  p95 {p95:,.0f} ms"
    )
    return median


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workloads", default="tumbling,hopping")
    parser.add_argument("--buckets", default="1,2", help="operator bucket counts to measure")
    parser.add_argument("--input", choices=("typed", "json"), default="typed")
    parser.add_argument(
        "--batch-engine",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure the batch window engine (spark.sluice.window.engine=batch)",
    )
    parser.add_argument(
        "--sync-batch-engine",
        action="store_true",
        help="also measure the batch engine folding each batch before the next is read",
    )
    parser.add_argument(
        "--stamped-batch-engine",
        action="store_true",
        help="also measure the batch engine reading the source's stamped documents",
    )
    parser.add_argument(
        "--stamped-operator",
        action="store_true",
        help="also measure the operator (one bucket) reading the source's stamped documents",
    )
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="also measure the operator's design with a no-op operator, with and without "
        "the late copies",
    )
    args = parser.parse_args(argv)

    spark = local_session("sluice-window-bench")
    directory = Path(tempfile.mkdtemp(prefix="sluice-window-input-"))
    ts = write_input(directory, rows=args.rows, files=args.files, keys=args.keys, fmt=args.input)
    print(
        f"{args.rows:,} rows, {args.files} batches of {args.rows // args.files:,}, "
        f"{args.keys} keys, {args.input} input"
    )
    for workload in args.workloads.split(","):
        hop = INTERVAL_MS if workload == "tumbling" else HOP_MS
        closing = closing_batches(ts, args.files, hop)
        fmt = args.input
        builders: dict[str, Any] = {
            "native": lambda w=workload, f=fmt: native_query(spark, directory, w, f)
        }
        for p in (int(b) for b in args.buckets.split(",")):
            name = "sluice" if p == 1 else f"sluice/P{p}"
            builders[name] = lambda w=workload, p=p, f=fmt: sluice_query(spark, directory, w, p, f)
        if args.stamped_operator:
            builders["sluice/stamped"] = lambda w=workload, f=fmt: sluice_query(
                spark, directory, w, 1, f, unstamped=False
            )
        if args.ceiling:
            for name, copies in (("sluice/no-op", True), ("sluice/no-op-no-copies", False)):
                builders[name] = lambda w=workload, f=fmt, c=copies: ceiling_query(
                    spark, directory, w, f, c
                )
        batch_names = ["sluice/batch"] if args.batch_engine else []
        batch_names += ["sluice/batch-sync"] if args.sync_batch_engine else []
        batch_names += ["sluice/batch-stamped"] if args.stamped_batch_engine else []
        for name in batch_names:
            builders[name] = lambda w=workload, f=fmt, n=name: sluice_query(
                spark, directory, w, 1, f, engine="batch", unstamped=n != "sluice/batch-stamped"
            )
        results: dict[str, list[Run]] = {name: [] for name in builders}
        for name, build in builders.items():  # warm-up, discarded
            run_once(
                build(),
                rows=args.rows,
                closing=closing,
                idle_batches=name == "native",
                pipelined=name != "sluice/batch-sync",
            )
        for n in range(args.runs):
            shift = n % len(builders)
            names = list(builders)[shift:] + list(builders)[:shift]  # rotate the order
            for name in names:
                run = run_once(
                    builders[name](),
                    rows=args.rows,
                    closing=closing,
                    idle_batches=name == "native",
                    pipelined=name != "sluice/batch-sync",
                )
                results[name].append(run)
        print(f"{workload}:")
        native = summary("native", results["native"])
        for name in [n for n in builders if n != "native"]:
            rate = summary(name, results[name])
            print(f"  ratio {name} / native = {rate / native:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
