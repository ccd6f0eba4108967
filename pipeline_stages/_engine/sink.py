"""The `foreachBatch` sink: split envelopes into results, DLQ records and stats, then write.

The batch's shape (`BatchResult`) and its ids are in `_stream.batch`; this module is the
Spark side that collects a micro-batch and hands it to the processor's `BatchWriter`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame

from pipeline_stages._stream.batch import (
    BatchResult,
    BatchWriter,
    Output,
    dlq_record,
    output_key,
    sink_target,
)
from pipeline_stages._stream.envelope import KIND_DLQ
from pipeline_stages._stream.frame import KIND_OUTPUT, KIND_STATS
from pipeline_stages._windowing.batch.pipelining import FoldPipeline


class ForeachBatchSink:
    """The callable handed to `writeStream.foreachBatch`.

    With the batch window engine the sink only reads each batch (and logs it) before it
    returns; the engine folds it in the background while Spark reads the next one
    (`batch.pipelining`). Whoever waits for a batch's outputs calls `flush` once Spark
    reports the batch done, and whoever stops the query calls `close` after it.

    Given `input_counts` (`_engine.observed.InputMetrics`), the sink reads the source's input
    counts of each batch once its rows are computed and hands them to the writer with the
    batch (`BatchResult.input`)."""

    def __init__(
        self,
        writer: BatchWriter,
        *,
        processor: str,
        window: Any | None = None,
        pipelined: bool = True,
        input_counts: Callable[[int], dict[str, int] | None] | None = None,
    ) -> None:
        self.writer = writer
        self.processor = processor
        #: The batch window engine (`batch.engine.BatchWindow`): the query's rows are its
        #: input, and it makes the envelopes.
        self.window = window
        self.input_counts = input_counts
        self._folds: Any | None = None
        if window is not None and pipelined:
            self._folds = FoldPipeline(window, self.write_envelopes, input_counts=input_counts)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Collect the batch, in emission order, and hand it to the writer."""
        if self._folds is not None:
            self._folds.submit(df, batch_id)
            return
        found = self.window.envelopes(df, batch_id) if self.window is not None else df.collect()
        counts = self.input_counts(batch_id) if self.input_counts is not None else None
        self.write_envelopes(batch_id, found, counts)

    def flush(self) -> None:
        """Return once every batch Spark finished is written (raises a failed fold's error)."""
        if self._folds is not None:
            self._folds.flush()

    def close(self) -> BaseException | None:
        """After the query stopped: wait for the last batch's write; returns the error of a
        fold that failed (its batch stays logged for the next start)."""
        return self._folds.close() if self._folds is not None else None

    @property
    def failure(self) -> BaseException | None:
        """A background fold's error (the query fails with it at its next batch)."""
        return self._folds.failure if self._folds is not None else None

    def write_envelopes(
        self, batch_id: int, found: list[Any], input_counts: dict[str, int] | None = None
    ) -> None:
        """Hand one batch's envelopes (and its input counts, if known) to the writer, in
        emission order."""
        # Sorting in Python, not with orderBy: a global sort samples its input first, which
        # would read the source twice.
        rows = sorted(found, key=lambda r: (r["seq"], r["part"], r["sub"]))
        now = datetime.now(tz=UTC)
        batch = BatchResult(batch_id=batch_id, input=input_counts)
        for row in rows:
            if row["kind"] == KIND_OUTPUT:
                batch.order.append((KIND_OUTPUT, len(batch.outputs)))
                batch.outputs.append(
                    Output(row["doc"], output_key(row, self.processor), sink_target(row["meta"]))
                )
            elif row["kind"] == KIND_DLQ:
                batch.order.append((KIND_DLQ, len(batch.dlq)))
                batch.dlq.append(dlq_record(row, processor=self.processor, now=now))
            elif row["kind"] == KIND_STATS:
                batch.stats.append(json.loads(row["doc"]))
        self.writer.write(batch)
