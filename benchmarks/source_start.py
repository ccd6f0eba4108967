"""How long a new streaming query waits for its first micro-batch, by kind of source.

`sluice process` through a running service, and every processor's start, begin with a new
query whose source is a Python data source (Sluice's File, Kafka, HTTP ingest and `documents`
sources). Before its first micro-batch Spark starts a Python process for the source's
planning (a fresh interpreter, not a fork of a warm worker), which imports PySpark and
unpickles the source, and so the source's modules. This measures that wait alone, on one warm
SparkSession (`local[*]`, Sluice's settings), for three sources each returning a couple of
rows in one batch, alternating:

* `native`: Spark's `rate-micro-batch` (no Python process);
* `python-minimal`: a Python data source defined here, importing nothing but PySpark;
* `sluice-documents`: Sluice's `documents` source (`$source.documents`), which imports
  `pipeline_stages` in that process.

For each: the seconds from `start()` to the first trigger's start (Spark's progress
timestamp) and to the end of the first batch; medians of `--runs` after one discarded round.

    python benchmarks/source_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)

from pipeline_stages._connectors.sources.documents import FORMAT as DOCUMENTS  # noqa: E402
from pipeline_stages._connectors.sources.register import register_all  # noqa: E402
from pipeline_stages._engine.session import build_session  # noqa: E402


class _OneBatchReader(DataSourceStreamReader):
    """One batch of one row, then nothing."""

    def initialOffset(self) -> dict[str, int]:
        return {"at": 0}

    def latestOffset(self) -> dict[str, int]:
        return {"at": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [InputPartition(0)] if start["at"] < end["at"] else []

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:  # noqa: ARG002
        yield (1,)


class MinimalSource(DataSource):
    """A Python data source importing nothing but PySpark."""

    @classmethod
    def name(cls) -> str:
        return "sluice_bench_minimal"

    def schema(self) -> str:
        return "x INT"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:  # noqa: ARG002
        return _OneBatchReader()


def first_batch(frame: Any) -> tuple[float, float]:
    """Seconds from `start()` to the first trigger's start and to its batch's end."""
    written: list[float] = []
    started = time.time()
    query = (
        frame.writeStream.foreachBatch(lambda _df, _batch_id: written.append(time.time()))
        .trigger(processingTime="0 seconds")
        .option("checkpointLocation", tempfile.mkdtemp(prefix="source_start_"))
        .start()
    )
    try:
        progress = None
        while not written or progress is None:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.01)
            progress = query.lastProgress
    finally:
        query.stop()
    trigger = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return trigger - started, written[0] - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    spark = build_session(app_name="sluice-bench-source-start")
    register_all(spark)
    spark.dataSource.register(MinimalSource)
    documents = json.dumps(['{"a": 1}', '{"a": 2}'])
    sources: dict[str, Callable[[], Any]] = {
        "native": lambda: (
            spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 2).load()
        ),
        "python-minimal": lambda: spark.readStream.format(MinimalSource.name()).load(),
        "sluice-documents": lambda: (
            spark.readStream.format(DOCUMENTS)
            .option("documents", documents)
            .option("batchSize", 2)
            .load()
        ),
    }
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in sources}
    for round_number in range(args.runs + 1):
        for name, frame in sources.items():
            timing = first_batch(frame())
            if round_number:  # the first round warms the session up
                figures[name].append(timing)
    print(f"medians of {args.runs} (seconds from start()):")
    print("source             first trigger  first batch done")
    for name, timings in figures.items():
        trigger = statistics.median(t for t, _ in timings)
        done = statistics.median(d for _, d in timings)
        print(f"{name:17s}  {trigger:13.2f}  {done:16.2f}")


if __name__ == "__main__":
    main()
