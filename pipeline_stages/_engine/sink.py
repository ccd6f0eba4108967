"""The `foreachBatch` sink: split envelopes into results, DLQ records and stats, then write.

The batch's shape (`BatchResult`) and its ids are in `_stream.batch`; this module is the
Spark side that hands a micro-batch to the processor's `BatchWriter`.

A writer that writes summaries (`SummaryWriter`: the service's and `sluice process`'s with a
sink) has its sink write each partition where it is and receives only the partitions'
summary (`_engine.partitions`): the envelopes are never collected into the driver. Other
writers (`sluice process` printing every document, tests) get every envelope, collected.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from pyspark.sql import DataFrame

from pipeline_stages._engine.observed import job_operators
from pipeline_stages._engine.partitions import (
    PartitionWork,
    Summarizer,
    assemble,
    summarize_rows,
)
from pipeline_stages._enrichment.operator_stats import add_operators
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
from pipeline_stages._stream.outputs import PartitionSink
from pipeline_stages._windowing.batch.pipelining import FoldPipeline


class SummaryWriter(Protocol):
    """A `BatchWriter` whose sink writes partitions on the executors (see the module doc),
    when its `writes_summaries` is true. Its `write` then receives batches with
    `BatchResult.totals` set: the sink has written them."""

    writes_summaries: bool
    #: The sink (None: outputs are only counted and sampled).
    partition_sink: PartitionSink | None
    #: How many of a batch's last messages it keeps (`sample`).
    sample_capacity: int

    def write(self, batch: BatchResult) -> None:
        """Record one written micro-batch (DLQ, sample, stats)."""


class ForeachBatchSink:
    """The callable handed to `writeStream.foreachBatch`.

    With the batch window engine the sink only reads each batch (and logs it) before it
    returns; the engine folds it in the background while Spark reads the next one
    (`batch.pipelining`). Whoever waits for a batch's outputs calls `flush` once Spark
    reports the batch done, and whoever stops the query calls `close` after it.

    Given `input_counts` (`_engine.observed.InputMetrics`), the sink reads the source's input
    counts of each batch once its rows are computed and hands them to the writer with the
    batch (`BatchResult.input`).

    The enrichment stages after a window on the batch engine run in a job of the engine's
    own (`BatchWindow.after_job`): their operator stats are read from it and handed to the
    writer with the same batch (`BatchResult.operators`), so a replayed batch replaces them."""

    def __init__(
        self,
        writer: BatchWriter,
        *,
        processor: str,
        window: Any | None = None,
        pipelined: bool = True,
        input_counts: Callable[[int], dict[str, Any] | None] | None = None,
    ) -> None:
        self.writer = writer
        self.processor = processor
        #: The batch window engine (`batch.engine.BatchWindow`): the query's rows are its
        #: input, and it makes the envelopes.
        self.window = window
        self.input_counts = input_counts
        self._folds: Any | None = None
        #: Operator stats of the stages after the window, per batch id, until it is written.
        self._after_operators: dict[int, dict[str, dict[str, Any]]] = {}
        if window is not None:
            window.after_job = self._after_job
        self._work: PartitionWork | None = None
        self._summarize: Summarizer | None = None
        if getattr(writer, "writes_summaries", False):
            summarized = cast("SummaryWriter", writer)
            self._work = PartitionWork(
                processor, summarized.partition_sink, max(0, int(summarized.sample_capacity))
            )
            self._summarize = Summarizer(self._work)
        if window is not None and pipelined:
            self._folds = FoldPipeline(window, self.write_envelopes, input_counts=input_counts)

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Collect the batch, in emission order, and hand it to the writer."""
        if self._folds is not None:
            self._folds.submit(df, batch_id)
            return
        if self.window is None and self._summarize is not None:
            rows = self._summarize(df, batch_id)
            counts = self.input_counts(batch_id) if self.input_counts is not None else None
            self._write_summary(batch_id, rows, counts)
            return
        found = self.window.envelopes(df, batch_id) if self.window is not None else df.collect()
        counts = self.input_counts(batch_id) if self.input_counts is not None else None
        self.write_envelopes(batch_id, found, counts)

    def _after_job(self, batch_id: int, job: DataFrame) -> None:
        """Keep the operator stats the stages after the window observed in batch `batch_id`
        (called by the engine's fold, right before the batch is written)."""
        self._after_operators[batch_id] = job_operators(job)

    def _with_after_operators(self, batch: BatchResult) -> BatchResult:
        batch.operators = add_operators(
            batch.operators, self._after_operators.pop(batch.batch_id, {})
        )
        return batch

    def _write_summary(
        self, batch_id: int, rows: list[dict[str, Any]], counts: dict[str, Any] | None
    ) -> None:
        """Publish what the partitions staged, then hand the summarised batch to the writer."""
        if self._work is None:
            raise RuntimeError("no partition work")
        batch, staged = assemble(self._work, batch_id, rows, counts)
        if self._work.sink is not None:
            self._work.sink.publish(batch_id, staged)
        self.writer.write(self._with_after_operators(batch))

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
        self, batch_id: int, found: list[Any], input_counts: dict[str, Any] | None = None
    ) -> None:
        """Hand one batch's envelopes (and its input counts, if known) to the writer, in
        emission order."""
        if self._work is not None:
            # Window results held by the driver: written by the same bulk writers.
            self._write_summary(batch_id, summarize_rows(found, self._work, batch_id), input_counts)
            return
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
        self.writer.write(self._with_after_operators(batch))
