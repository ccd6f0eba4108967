"""The batch window engine's input log: each micro-batch's rows on disk until they are folded.

The engine folds batch N in a background thread while Spark reads batch N+1
(`batch.pipelining`). Spark commits a batch when `foreachBatch` returns and never hands
it over again, so before returning, the sink writes the batch's rows here (Arrow IPC, with the
batch's processing time), and it removes them once the fold has saved the state after the
batch and written its outputs. A batch still here when a query starts was committed but not
(wholly) folded: it is folded first, from the state before it, as a Spark replay would be, and
its outputs are written again (the sinks are idempotent on batch id). The batch's input counts
travel with it (schema metadata), so its stats are recorded with its outputs whenever it is
folded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from pipeline_stages._windowing.batch.engine import BatchInput

#: The log's directory inside the engine's state directory.
INPUT_DIR = "inputs"
SUFFIX = ".arrow"
#: Where a logged batch keeps its processing time (schema metadata).
_NOW_KEY = b"sluice.now_ms"
#: Where a logged batch keeps its input counts (JSON; absent when unknown).
_INPUT_KEY = b"sluice.input"


class InputLog:
    """The logged batches in one directory (created when missing)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, batch: BatchInput) -> None:
        """Log `batch` atomically and durably (it replaces an earlier attempt's copy)."""
        metadata = dict(batch.table.schema.metadata or {})
        metadata[_NOW_KEY] = str(batch.now_ms).encode()
        if batch.input is not None:
            metadata[_INPUT_KEY] = json.dumps(batch.input).encode()
        table = batch.table.replace_schema_metadata(metadata)
        path = self._path(batch.batch_id)
        written = path.with_suffix(".tmp")
        with written.open("wb") as handle:
            with pa.ipc.new_file(handle, table.schema) as writer:
                writer.write_table(table)
            handle.flush()
            os.fsync(handle.fileno())
        written.replace(path)

    def batch_ids(self) -> list[int]:
        """The logged batches, in order."""
        return sorted(int(p.name[: -len(SUFFIX)]) for p in self.directory.glob(f"*{SUFFIX}"))

    def read(self, batch_id: int, session: SparkSession) -> BatchInput:
        """A logged batch, as `BatchWindow.read` returned it."""
        with pa.memory_map(str(self._path(batch_id))) as source:
            table = pa.ipc.open_file(source).read_all()
        metadata = dict(table.schema.metadata or {})
        now_ms = int(metadata.pop(_NOW_KEY))
        counts = metadata.pop(_INPUT_KEY, None)
        return BatchInput(
            batch_id,
            table.replace_schema_metadata(metadata or None),
            now_ms,
            session,
            None if counts is None else dict(json.loads(counts)),
        )

    def remove(self, batch_id: int) -> None:
        """Forget a batch (folded, or to be handed over again by Spark)."""
        self._path(batch_id).unlink(missing_ok=True)

    def _path(self, batch_id: int) -> Path:
        return self.directory / f"{batch_id:020d}{SUFFIX}"
