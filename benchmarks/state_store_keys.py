"""Per-key state in Spark's state store: what a batch costs per group it touches, from Python
and natively, as open groups grow.

The window engine keeps a bucket's state as one pickled blob (`window_state_size.py`): every
batch rewrites all of it. Keeping one state row per (window, key) in Spark's state store
(RocksDB, changelog checkpointing: Sluice's session settings) writes only what a batch
touched. This measures that step alone, in one process, on the same input, two ways:

* `python`: `transformWithStateInPandas` with a `MapState` keyed by (window, key), one
  `getValue` + `updateValue` per touched group (what a Python operator holding its groups in
  the state store would do);
* `native`: Spark's streaming `groupBy(window, key).agg(count, sum)` in update mode, the
  JVM's own per-key state (what aggregating on-time documents in the JVM would keep).

Every micro-batch (`rate-micro-batch`, `--touched` rows) touches that many new groups, so the
open groups grow by `--touched` per batch. Printed per engine: every few batches the open
groups, the batch's `addBatch` time, the time per touched group, the RocksDB bytes written,
and the size of the batch's changelog file in the checkpoint (what the batch writes there);
then medians over the second half of the batches and the ratio python / native.

    python benchmarks/state_store_keys.py [--touched 20000] [--batches 30]

The `python` engine needs the `protobuf` package (PySpark's state client): `pip install
protobuf`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline_stages._engine.session import build_session  # noqa: E402

try:
    from pyspark.sql.streaming.stateful_processor import (
        StatefulProcessor,
        StatefulProcessorHandle,
    )
except ImportError:  # an older PySpark: the python engine cannot run
    StatefulProcessor = object  # type: ignore[assignment,misc]
    StatefulProcessorHandle = Any  # type: ignore[assignment,misc]

#: Groups per window: the window a row's group falls in is `value // WINDOW_GROUPS`.
WINDOW_GROUPS = 1_000_000


class MapStateGroups(StatefulProcessor):  # type: ignore[misc]
    """One bucket (the grouping key) holding its groups in a `MapState`: count and sum per
    (window, key), read and written once per touched group. Yields one row per call with the
    groups touched and the seconds spent in the state calls."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.groups = handle.getMapState("groups", "w LONG, g LONG", "n LONG, total LONG")

    def handleInputRows(
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: ARG002 - PySpark's signature; no timers here
    ) -> Iterator[pd.DataFrame]:
        started = time.perf_counter()
        touched = 0
        for frame in rows:
            for w, g, v in zip(
                frame["w"].tolist(), frame["g"].tolist(), frame["v"].tolist(), strict=True
            ):
                old = self.groups.getValue((w, g))
                n, total = old if old is not None else (0, 0)
                self.groups.updateValue((w, g), (n + 1, total + v))
                touched += 1
        seconds = time.perf_counter() - started
        yield pd.DataFrame({"bucket": [key[0]], "touched": [touched], "seconds": [seconds]})

    def close(self) -> None:
        pass


def _input(spark: Any, touched: int) -> Any:
    from pyspark.sql import functions as F

    rows = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", touched).load()
    return rows.select(
        F.lit(0).alias("bucket"),
        F.floor(F.col("value") / WINDOW_GROUPS).cast("long").alias("w"),
        F.col("value").alias("g"),
        (F.col("value") % 100).alias("v"),
    )


def _query(spark: Any, engine: str, touched: int) -> Any:
    from pyspark.sql import functions as F

    rows = _input(spark, touched)
    if engine == "python":
        return rows.groupBy("bucket").transformWithStateInPandas(
            statefulProcessor=MapStateGroups(),
            outputStructType="bucket INT, touched LONG, seconds DOUBLE",
            outputMode="Update",
            timeMode="None",
        )
    return rows.groupBy("w", "g").agg(F.count("*").alias("n"), F.sum("v").alias("total"))


def _changelog_sizes(checkpoint: Path) -> dict[int, int]:
    """`{version: bytes}` of the state store's changelog files (version = batch id + 1)."""
    sizes: dict[int, int] = {}
    for path in (checkpoint / "state").rglob("*.changelog"):
        version = int(path.name.split(".")[0].split("_")[0])
        sizes[version] = sizes.get(version, 0) + path.stat().st_size
    return sizes


def jvm_peak_rss_mb() -> float | None:
    """The peak resident memory (VmHWM) of this process's Spark JVM, MB (None: not found).
    Only grows: an engine run after another reports the larger of both."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        if fields.get("PPid", "").strip() == str(os.getpid()) and "java" in fields["Name"]:
            return int(fields["VmHWM"].split()[0]) / 1024
    return None


def run(spark: Any, engine: str, touched: int, batches: int) -> list[dict[str, Any]]:
    """One engine's query over `batches` micro-batches; one row of figures per batch."""
    checkpoint = Path(tempfile.mkdtemp(prefix=f"state_keys_{engine}_"))
    seen: list[int] = []
    query = (
        _query(spark, engine, touched)
        .writeStream.outputMode("update")
        .foreachBatch(lambda df, batch_id: (df.count(), seen.append(batch_id)))
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        while len(seen) < batches:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.2)
    finally:
        query.stop()
    changelogs = _changelog_sizes(checkpoint)
    out = []
    for progress in query.recentProgress:
        batch_id = int(progress["batchId"])
        state = progress["stateOperators"][0] if progress["stateOperators"] else {}
        metrics = state.get("customMetrics", {})
        add_batch = int(progress["durationMs"].get("addBatch", 0))
        out.append(
            {
                "batch": batch_id,
                "open": int(state.get("numRowsTotal", 0)),
                "addBatchMs": add_batch,
                "usPerGroup": add_batch * 1000 / touched,
                "rocksdbBytesWritten": int(metrics.get("rocksdbTotalBytesWritten", 0)),
                "changelogBytes": changelogs.get(batch_id + 1, 0),
                "commitMs": int(state.get("commitTimeMs", 0)),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--touched", type=int, default=20_000, help="groups per batch")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--engines", nargs="+", default=["native", "python"])
    args = parser.parse_args()
    spark = build_session(
        master="local[2]",
        app_name="sluice-bench-state-keys",
        conf={"spark.sql.shuffle.partitions": "1"},
    )
    medians: dict[str, dict[str, float]] = {}
    for engine in args.engines:
        rows = run(spark, engine, args.touched, args.batches)
        print(f"\n{engine}: {args.touched} groups touched per batch")
        print(
            "batch  open groups  addBatch ms  us/group  RocksDB bytes  changelog bytes  commit ms"
        )
        for row in rows[:: max(1, len(rows) // 8)]:
            print(
                f"{row['batch']:5d}  {row['open']:11,d}  {row['addBatchMs']:11,d}  "
                f"{row['usPerGroup']:8.1f}  {row['rocksdbBytesWritten']:13,d}  "
                f"{row['changelogBytes']:15,d}  {row['commitMs']:9d}"
            )
        later = rows[len(rows) // 2 :]
        medians[engine] = {
            key: statistics.median(row[key] for row in later)
            for key in ("addBatchMs", "usPerGroup", "changelogBytes")
        }
        print(
            f"median over batches {later[0]['batch']}-{later[-1]['batch']} "
            f"({later[0]['open']:,}-{later[-1]['open']:,} open groups): "
            f"{medians[engine]['addBatchMs']:.0f} ms per batch, "
            f"{medians[engine]['usPerGroup']:.1f} us per touched group, "
            f"{medians[engine]['changelogBytes']:,.0f} changelog bytes per batch; "
            f"the JVM's peak RSS so far {jvm_peak_rss_mb() or 0:,.0f} MB"
        )
    if {"python", "native"} <= medians.keys():
        ratio = medians["python"]["usPerGroup"] / medians["native"]["usPerGroup"]
        print(f"\npython / native time per touched group: {ratio:.1f}x")


if __name__ == "__main__":
    main()
