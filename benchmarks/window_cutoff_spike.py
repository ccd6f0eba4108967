"""Spike: a window design that decides lateness *before* aggregating, so Spark can aggregate.

Not Sluice's operator. A measurement of the candidate design named in issue 3's notes, on the
same input and against the same native baseline as `window_throughput.py`, to say whether it
can reach the 0.8x target before anyone builds it.

The observation it rests on: a document d of window w (end e) is late iff some document that
arrived before it (in this or an earlier micro-batch) has event time >= e + allowedLateness +
1 ms (watermark = max event time - 1 ms; w closes when watermark - allowedLateness >= e). So
per micro-batch, for every window end e, lateness is a *cutoff position*: the first arrival
position whose event time reaches e + L + 1 ms. All cutoffs of a batch come from one small
aggregation: group the batch's documents by the largest window end they close,
floor((t - L - 1) / hop) * hop, take the minimum position per group, and a suffix minimum over
the groups gives each window's cutoff. Per micro-batch, in `foreachBatch`:

1. job 1, over positions and event times only: the cutoff groups -> the driver;
2. job 2: the on-time rows aggregated per (window, key) natively (partial aggregation before
   the shuffle, as native `window()` does), and the late rows with their DLQ copy (`to_json`,
   computed for late rows only) and the windows they missed -> the driver. `$push` keeps every
   value anyway, so the hopping workload ships its on-time (window, key, value) rows flat
   instead and builds lists and `$top` when a window closes.

State (the max event time, partials per open (window, key)) lives in the driver, in pandas;
windows close when max - 1 ms - L >= end. Every run's emitted windows (count and sum, or
`$push` list and `$top` id, per (window, key)) and late positions are checked against
`reference`, an independent pandas model of the rule (per-document running max in arrival
order). `--runs` rotates the order of four runners:
native `window()`, Sluice's operator today (`window_throughput.sluice_query`, P = 1), and the
spike reading key and inputs out of VARIANT documents (`cutoff/document`, what Sluice's
compiled stages do) or from the typed columns (`cutoff/columns`, see `documents`).
`cutoff/cached` (not run by default) is `cutoff/document` with the batch's documents
persisted in memory for both jobs.

`--input json` reads the JSON-lines input of `window_throughput.py --input json` instead:
native parses it with `from_json`, Sluice's operator and `cutoff/document` read it through
Sluice's real source path (`window_throughput.json_frame`: parse, `timeField: "$ts"`, the
stamped document), the spike's key and inputs out of that document; `cutoff/columns` does
not apply. Both of the spike's jobs recompute the source path from the batch's text
(`foreachBatch` recomputes the plan per job), except in `cutoff/cached`.

What the spike leaves out, and a product would need: exactly-once (state versioned by batch
id beside the checkpoint), idleTimeout (a driver timer; with state in the driver no Spark
no-data batch is needed), window offsets, sessions, inner pipelines, the other accumulators,
MQL's type rules for `$sum` etc., state larger than the driver, sources whose micro-batch is
not one ordered partition.

    python benchmarks/window_cutoff_spike.py [--rows 1000000] [--files 8] [--keys 1000]
        [--runs 3] [--workloads tumbling,hopping] [--input typed|json]
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
import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from window_throughput import (  # noqa: E402  (a sibling script, not a package)
    BASE_MS,
    HOP_MS,
    INTERVAL_MS,
    LATENESS_MS,
    closing_batches,
    json_frame,
    local_session,
    native_query,
    run_once,
    sluice_query,
    stream,
    write_input,
    write_parquet,
)


class CutoffWindows:
    """The spike's window operator: one instance per query, state in the driver."""

    def __init__(self, workload: str, fields: str = "document", cached: bool = False) -> None:
        self.workload = workload
        self.fields = fields
        self.cached = cached  # persist the batch's documents for both jobs
        self.hop = INTERVAL_MS if workload == "tumbling" else HOP_MS
        self.max_ms: int | None = None
        self.state = pd.DataFrame()
        self.emitted: list[pd.DataFrame] = []
        self.late: list[pd.DataFrame] = []
        self.rows = 0  # `numInputRows` counts the batch once per job that reads it

    # ---------------------------------------------------------------- per micro-batch

    def __call__(self, batch: DataFrame, _batch_id: int) -> None:
        docs = documents(batch, self.fields)
        if not self.cached:
            self.fold(docs)
            return
        docs = docs.persist(StorageLevel.MEMORY_ONLY)
        try:
            self.fold(docs)
        finally:
            docs.unpersist()

    def fold(self, docs: DataFrame) -> None:
        """The two jobs over one batch's documents, and the driver's state."""
        cutoff_of = self.cutoffs(docs)
        if cutoff_of is None:
            return
        prev = self.max_ms if self.max_ms is not None else np.iinfo(np.int64).min
        rows = self.window_rows(docs)
        closed_before = F.lit(prev) >= F.col("end") + LATENESS_MS + 1
        late = closed_before | (F.col("seq") > cutoff_of(F.col("end")))
        out = self.collect(rows.withColumn("late", late)).toPandas()
        self.max_ms = max(prev, int(out.tmax.max()))
        self.rows += int(out.docs.sum())
        is_late = out.late if "late" in out else out.seq.notna()
        self.record_late(out[is_late])
        on_time = out[~is_late].drop(columns=["doc", "tmax", "docs", "late"], errors="ignore")
        self.merge(on_time.drop(columns=["seq"]) if self.workload == "tumbling" else on_time)
        self.close()

    def cutoffs(self, docs: DataFrame) -> Any:
        """Job 1, over positions and event times only: for each window end e, the first
        position whose event time is >= e + L + 1 ms (the documents of e after it are late).

        Group by the largest end a document's event time closes, floor((t - L - 1) / hop) *
        hop; the minimum position per group, suffix-minimised over the groups, is the cutoff
        of every end. None for an empty batch."""
        crosses = F.floor((F.col("t") - LATENESS_MS - 1) / self.hop) * self.hop
        groups = (
            docs.groupBy(crosses.cast("bigint").alias("g"))
            .agg(F.min("seq").alias("first"))
            .toPandas()
            .sort_values("g")
        )
        if groups.empty:
            return None
        g0, g1 = int(groups.g.iloc[0]), int(groups.g.iloc[-1])
        dense = np.full((g1 - g0) // self.hop + 1, np.iinfo(np.int64).max, dtype=np.int64)
        dense[(groups.g.to_numpy() - g0) // self.hop] = groups["first"].to_numpy()
        suffix = F.lit(np.minimum.accumulate(dense[::-1])[::-1].tolist())

        def cutoff_of(end: Any) -> Any:
            index = F.greatest(((end - g0) / self.hop).cast("int") + 1, F.lit(1))
            never = F.lit(np.iinfo(np.int64).max)  # no document of the batch closes `end`
            return F.when(end > g1, never).otherwise(F.element_at(suffix, index))

        return cutoff_of

    def window_rows(self, docs: DataFrame) -> DataFrame:
        """One row per (document, window it falls in); `end` is the window's end."""
        last_end = F.floor(F.col("t") / self.hop) * self.hop + self.hop
        count = INTERVAL_MS // self.hop
        k = F.explode(F.sequence(F.lit(0), F.lit(count - 1))) if count > 1 else F.lit(0)
        rows = docs.withColumn("k", k)
        return rows.withColumn("end", (last_end + F.col("k") * self.hop).cast("bigint"))

    def collect(self, rows: DataFrame) -> DataFrame:
        """Job 2: on-time rows aggregate per (window, key), natively (partial aggregation
        before the shuffle); a late row groups under its position, its DLQ copy (`to_json`,
        only computed for late rows) and the window it missed. Keys, not `first`/
        `collect_list`, carry the late rows' fields, which keeps the sums in Spark's fast
        fixed-width hash aggregation."""
        if self.workload != "tumbling":
            return self.buffered(rows)
        late, on_time = F.col("late"), ~F.col("late")
        keys = [
            F.col("end"),
            F.when(on_time, F.col("key")).alias("key"),
            F.when(late, F.col("seq")).alias("seq"),
            F.when(late, F.to_json("doc")).alias("doc"),
        ]
        values = [
            F.sum(F.when(on_time, F.col("v"))).alias("sum"),
            F.count(F.when(on_time, F.col("v"))).alias("n_v"),
            F.count(F.when(on_time, F.lit(1))).alias("n"),
            F.max("t").alias("tmax"),
            F.sum(F.when(F.col("k") == 0, 1).otherwise(0)).alias("docs"),
        ]
        return rows.groupBy(*keys).agg(*values)

    def buffered(self, rows: DataFrame) -> DataFrame:
        """`$push` keeps every value, so nothing aggregates: the on-time (window, key, value)
        rows go to the driver flat (Arrow, no nested types), late rows as above."""
        late = F.col("late")
        return rows.select(
            "end",
            F.when(~late, F.col("key")).alias("key"),
            "seq",
            F.when(late, F.to_json("doc")).alias("doc"),
            "v",
            "id",
            F.col("t").alias("tmax"),
            F.when(F.col("k") == 0, 1).otherwise(0).alias("docs"),
            late.alias("late"),
        )

    # ---------------------------------------------------------------- state in the driver

    def record_late(self, rows: pd.DataFrame) -> None:
        """One DLQ entry per late document, from its (document, missed window) rows."""
        late = rows.groupby("seq", as_index=False).agg(doc=("doc", "first"), end=("end", list))
        starts = late.end.map(lambda ends: [end - INTERVAL_MS for end in ends])
        self.late.append(late.drop(columns=["end"]).assign(missedWindowStartTimes=starts))

    def merge(self, batch: pd.DataFrame) -> None:
        """Add a batch's partials. Tumbling sums merge at once; hopping (window, key, value)
        rows are appended, and grouped once, when their window closes."""
        if self.workload == "tumbling" and not self.state.empty:
            both = pd.concat([self.state, batch], ignore_index=True)
            self.state = both.groupby(["end", "key"], as_index=False)[["sum", "n_v", "n"]].sum()
        else:
            self.state = pd.concat([self.state, batch], ignore_index=True)

    def merged(self, partials: pd.DataFrame) -> pd.DataFrame:
        """One row per (window, key) out of a closing window's partials."""
        if self.workload == "tumbling":
            return partials
        ordered = partials.sort_values(["end", "key", "seq"])
        end, key = ordered.end.to_numpy(), ordered.key.to_numpy()
        starts = np.flatnonzero(np.r_[True, (end[1:] != end[:-1]) | (key[1:] != key[:-1])])
        bounds = np.r_[starts, len(ordered)]
        v, ids = ordered.v.to_numpy(), ordered.id.to_numpy()
        # `$top` with sortBy {v: -1}: the greatest v, the earliest arrival among equals.
        best = [a + int(np.argmax(v[a:b])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        return pd.DataFrame(
            {
                "end": end[starts],
                "key": key[starts],
                "top": ids[best],
                "push": np.split(v, starts[1:]),
            }
        )

    def close(self) -> None:
        """Emit (and drop) the windows the watermark closed: max - 1 - L >= end."""
        assert self.max_ms is not None
        closing = self.state.end <= self.max_ms - 1 - LATENESS_MS
        if closing.any():
            done = self.merged(self.state[closing]).sort_values(["end", "key"])
            self.emitted.append(done)
            self.state = self.state[~closing]


def documents(batch: DataFrame, fields: str) -> DataFrame:
    """Position, event time, key and `$group` inputs per record, and the VARIANT document
    (Sluice's document model: `to_variant_object`, with the `_ts` date, as in
    `window_throughput.py`). `fields="document"` reads key and inputs out of the document, as
    Sluice's compiled stages do; `fields="columns"` takes them from the typed columns, what a
    compiler that knows a source's typed fields could do: the document is then only built for
    the late rows' DLQ copies. `fields="source"`: `batch` is Sluice's source frame over the
    JSON input (`json_frame`), whose position, event time and document it takes."""
    if fields == "source":
        from pipeline_stages._stream import frame as fr

        return batch.select(
            F.col(fr.SEQ).alias("seq"),
            F.col(fr.EVENT_MS).alias("t"),
            F.try_variant_get(fr.DOC, "$.key", "string").alias("key"),
            F.try_variant_get(fr.DOC, "$.v", "double").alias("v"),
            F.try_variant_get(fr.DOC, "$.id", "bigint").alias("id"),
            F.col(fr.DOC).alias("doc"),
        )
    doc = F.to_variant_object(
        F.named_struct(
            F.lit("key"), F.col("key"), F.lit("v"), F.col("v"), F.lit("id"), F.col("id"),
            F.lit("_ts"), F.col("ts"),
        )
    )  # fmt: skip
    with_doc = batch.select(
        "seq", F.unix_millis("ts").alias("t"), "key", "v", "id", doc.alias("doc")
    )
    if fields == "columns":
        return with_doc
    return with_doc.select(
        "seq",
        "t",
        F.try_variant_get("doc", "$.key", "string").alias("key"),
        F.try_variant_get("doc", "$.v", "double").alias("v"),
        F.try_variant_get("doc", "$.id", "bigint").alias("id"),
        "doc",
    )


def write_edge_input(directory: Path, *, rows: int, files: int, keys: int) -> np.ndarray:
    """Event times within 2 ms of window ends and of end + L + 1 ms, in a strong disorder,
    so that ties at the lateness boundary (a cutoff document right before a document of the
    window it closes, a previous batch's max exactly at end + L + 1 ms) happen often."""
    rng = np.random.default_rng(11)
    near = np.array([-2, -1, 0, 1, 2], dtype=np.int64)
    anchors = np.array([0, LATENESS_MS + 1], dtype=np.int64)
    grid = BASE_MS + HOP_MS * rng.integers(0, rows // 50 + 8, rows)
    grid = np.sort(grid) + HOP_MS * rng.integers(-3, 2, rows)  # mostly forward, some behind
    ts = grid + rng.choice(anchors, rows) + rng.choice(near, rows)
    seq = np.arange(rows, dtype=np.int64)
    key = np.array([f"k{n}" for n in range(keys)])[rng.integers(0, keys, rows)]
    v = np.round(rng.random(rows) * 100, 2)
    write_parquet(directory, files=files, seq=seq, ts=ts, key=key, v=v)
    per_file = rows // files
    return ts[: per_file * files]


# --------------------------------------------------------------------------- reference


def reference(ts: np.ndarray, key: np.ndarray, v: np.ndarray, workload: str) -> dict[str, Any]:
    """The same rule, per document in arrival order, in numpy/pandas: per emitted (end, key)
    the count and sum (tumbling) or the `$push` list in arrival order and the `$top` id
    (hopping), and the late positions. Positions are the row numbers (`seq` = `id` = row)."""
    hop = INTERVAL_MS if workload == "tumbling" else HOP_MS
    before = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(ts)[:-1]])
    final_close = int(ts.max()) - 1 - LATENESS_MS
    seq = np.arange(len(ts))
    late: set[int] = set()
    frames = []
    for k in range(INTERVAL_MS // hop):
        end = (ts // hop) * hop + hop + k * hop
        is_late = before >= end + LATENESS_MS + 1
        late.update(np.nonzero(is_late)[0].tolist())
        keep = ~is_late & (end <= final_close)
        frames.append(
            pd.DataFrame({"end": end[keep], "key": key[keep], "v": v[keep], "seq": seq[keep]})
        )
    rows = pd.concat(frames).sort_values(["end", "key", "seq"])
    groups = rows.groupby(["end", "key"])
    if workload == "tumbling":
        found = groups.v.agg(["count", "sum"])
        return {
            "windows": {
                (int(e), str(k)): (int(n), float(x)) for (e, k), n, x in found.itertuples()
            },
            "late": late,
        }
    best = rows.sort_values(["v", "seq"], ascending=[False, True], kind="stable")
    top = best.drop_duplicates(["end", "key"]).set_index(["end", "key"]).seq
    pushed = groups.v.agg(list)
    windows = {
        (int(e), str(k)): (list(values), int(top[(e, k)])) for (e, k), values in pushed.items()
    }
    return {"windows": windows, "late": late}


def check(op: CutoffWindows, expected: dict[str, Any]) -> None:
    """The spike's emitted windows and late positions are the reference's, exactly (sums to
    1e-9 relative: the order of additions differs)."""
    emitted = pd.concat(op.emitted, ignore_index=True)
    want = expected["windows"]
    if op.workload == "tumbling":
        got = {(int(r.end), str(r.key)): (int(r.n), float(r.sum)) for r in emitted.itertuples()}
        assert got.keys() == want.keys(), (len(got), len(want))
        for k, (n, total) in want.items():
            assert got[k][0] == n and abs(got[k][1] - total) <= 1e-9 * max(1.0, abs(total)), k
    else:
        got = {(int(r.end), str(r.key)): (list(r.push), int(r.top)) for r in emitted.itertuples()}
        assert got.keys() == want.keys(), (len(got), len(want))
        bad = [k for k in want if got.get(k) != want[k]]
        assert not bad, (
            len(bad),
            bad[:2],
            [got.get(k) for k in bad[:2]],
            [want[k] for k in bad[:2]],
        )
    late = set(pd.concat(op.late).seq.tolist()) if op.late else set()
    assert late == expected["late"], (len(late), len(expected["late"]))


# --------------------------------------------------------------------------- running


def timed(query: Any, rows: int, op: CutoffWindows | None = None) -> float:
    """Rows/s until `rows` rows are done: native by its progress, the spike by its count."""
    checkpoint = tempfile.mkdtemp(prefix="sluice-spike-")
    started = time.monotonic()
    handle = query.option("checkpointLocation", checkpoint).trigger(processingTime="0 seconds")
    handle = handle.start()
    try:
        while (
            op.rows if op is not None else sum(p["numInputRows"] for p in handle.recentProgress)
        ) < rows:
            if handle.exception() is not None:
                raise RuntimeError(str(handle.exception()))
            time.sleep(0.05)
        return rows / (time.monotonic() - started)
    finally:
        handle.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument(
        "--data",
        choices=("benchmark", "edges"),
        default="benchmark",
        help="`edges`: event times on the lateness boundaries (checks, not speed)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workloads", default="tumbling,hopping")
    parser.add_argument(
        "--runners",
        default="native,sluice operator,cutoff/document,cutoff/columns",
        help="which to run (native is the ratios' baseline)",
    )
    parser.add_argument("--input", choices=("typed", "json"), default="typed")
    args = parser.parse_args(argv)
    fmt = args.input
    if fmt == "json" and args.data == "edges":
        parser.error("--data edges writes typed input only")

    spark = local_session("sluice-cutoff-spike")
    directory = Path(tempfile.mkdtemp(prefix="sluice-spike-input-"))
    if args.data == "edges":
        ts = write_edge_input(directory, rows=args.rows, files=args.files, keys=args.keys)
    else:
        ts = write_input(directory, rows=args.rows, files=args.files, keys=args.keys, fmt=fmt)
    if fmt == "json":
        parts = [
            pd.read_json(path, lines=True, precise_float=True)
            for path in sorted(directory.glob("*.json"))
        ]
        table = pd.concat(parts, ignore_index=True).sort_values("seq")
    else:
        table = pd.read_parquet(directory).sort_values("seq")
    key, v = table.key.to_numpy(), table.v.to_numpy()
    print(f"{args.rows:,} rows, {args.files} batches of {args.rows // args.files:,}, {fmt}")

    def source() -> DataFrame:
        """The spike's input stream: typed columns, or Sluice's source path over JSON."""
        if fmt == "typed":
            return stream(spark, directory)
        from pipeline_stages._base import ProblemCollector
        from pipeline_stages._stream.context import CompileContext

        ctx = CompileContext(spark=spark, processor_name="spike", problems=ProblemCollector())
        return json_frame(spark, directory, ctx).df

    def native(workload: str) -> float:
        query = native_query(spark, directory, workload, fmt)
        return timed(query.writeStream.foreachBatch(lambda b, _i: b.collect()), args.rows)

    def measure(workload: str) -> None:
        expected = reference(ts, key, v, workload)
        operators: list[CutoffWindows] = []

        def spike(w: str, fields: str, cached: bool = False) -> float:
            operators.append(CutoffWindows(w, "source" if fmt == "json" else fields, cached))
            query = source().writeStream.foreachBatch(operators[-1])
            return timed(query, args.rows, operators[-1])

        def sluice_today(w: str) -> float:
            hop = INTERVAL_MS if w == "tumbling" else HOP_MS
            closing = closing_batches(ts, args.files, hop)
            return run_once(
                sluice_query(spark, directory, w, 1, fmt), rows=args.rows, closing=closing
            ).rows_per_s

        runners: dict[str, Any] = {
            "native": native,
            "sluice operator": sluice_today,
            "cutoff/document": lambda w: spike(w, "document"),
            "cutoff/columns": lambda w: spike(w, "columns"),
            "cutoff/cached": lambda w: spike(w, "document", cached=True),
        }
        wanted = args.runners.split(",")
        if fmt == "json":
            wanted = [name for name in wanted if name != "cutoff/columns"]
        runners = {name: run for name, run in runners.items() if name in wanted}
        rates: dict[str, list[float]] = {name: [] for name in runners}
        for run in runners.values():  # warm-up, discarded
            run(workload)
        for n in range(args.runs):
            shift = n % len(runners)
            names = list(runners)[shift:] + list(runners)[:shift]  # rotate the order
            for name in names:
                rates[name].append(runners[name](workload))
        for op in operators:
            check(op, expected)
        medians = {name: statistics.median(r) for name, r in rates.items()}
        print(f"{workload}: (results equal `reference` in all {len(operators)} spike runs)")
        for name, r in rates.items():
            runs = " / ".join(f"{x:,.0f}" for x in r)
            ratio = f"({medians[name] / medians['native']:.2f}x)" if "native" in medians else ""
            print(f"  {name:<16} median {medians[name]:>10,.0f} rows/s  {ratio}   runs {runs}")

    for workload in args.workloads.split(","):
        measure(workload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
