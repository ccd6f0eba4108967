"""The File and HTTP-ingest sources' own reading, without Spark: rows per CPU-second of the
readers' `latestOffset` + `partitions` + `read` (one task, so CPU per row, not parallelism)
over N JSON lines, at 10k and 120k rows per micro-batch.

A check of the sources' Python cost that a loaded machine does not distort (CPU time, not
wall time); `source_throughput.py` measures the sources in Spark against native reading.
Run it on two checkouts to compare them:

    PYTHONPATH=$PWD python3 benchmarks/source_read_cost.py [--rows 120000]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadMaxRows

from pipeline_stages._connectors.sources.files import FileStreamReader
from pipeline_stages._connectors.sources.http_ingest import HttpIngestStreamReader, encode_record
from pipeline_stages._connectors.sources.spool import Spool


def count(items: Iterable[Any]) -> int:
    """Rows of what a reader yields (Arrow batches, or tuples in older readers)."""
    return sum(item.num_rows if hasattr(item, "num_rows") else 1 for item in items)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=120_000)
    rows = parser.parse_args().rows
    rng = random.Random(7)
    lines = [
        json.dumps(
            {
                "device": f"d{rng.randrange(1000)}",
                "site": rng.choice(["north", "south", "east"]),
                "status": "ok",
                "reading": rng.randrange(100),
                "watts": round(rng.random() * 100, 3),
                "seq": n,
            }
        )
        for n in range(rows)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "src").mkdir()
        (root / "src" / "a.jsonl").write_text("\n".join(lines) + "\n")
        (root / "src" / "b.jsonl").write_text("")  # a later file: every line of a is complete
        spool = Spool(root / "data")
        for first in range(0, rows, 10_000):
            spool.append("c", [encode_record(line.encode(), 1) for line in lines[first:][:10_000]])
        for batch in (10_000, 120_000):
            readers: dict[str, Any] = {
                "file": FileStreamReader({"directory": str(root / "src")}),
                "http": HttpIngestStreamReader({"datadir": str(root / "data"), "connection": "c"}),
            }
            for name, reader in readers.items():
                start, total = reader.initialOffset(), 0
                began = time.process_time()
                while total < rows:
                    end = reader.latestOffset(start, ReadMaxRows(batch))
                    total += sum(count(reader.read(p)) for p in reader.partitions(start, end))
                    start = end
                rate = rows / (time.process_time() - began)
                print(f"{name} batch {batch:>7,}: {rate:10,.0f} rows per CPU-second", flush=True)


if __name__ == "__main__":
    main()
