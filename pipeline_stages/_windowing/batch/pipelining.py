"""The batch window engine, pipelined: batch N folds in a thread while Spark reads batch N+1.

A micro-batch of the batch engine is a Spark job that brings the batch's rows to the driver
(`BatchWindow.read`), then the fold in the driver's Python (`BatchWindow.fold`: the window
core, the state save, the stages after the window) and the sink's write. While Spark reads,
the driver's Python waits; while the driver folds, Spark waits. Here `foreachBatch` returns
as soon as the batch is read and logged, and the fold runs in one background thread, so it
overlaps the next batch's read (`benchmarks/window_throughput.py` measures the gain).

What keeps that exact and lossless:

* order: one thread folds, in batch order; a batch is handed over only once the previous
  one is folded, so at most two batches are in the driver (one being read, one folding);
* crashes: Spark commits a batch once `foreachBatch` returns, so the batch is logged first
  (`batch.input_log`); a query that starts finds the batches committed but not folded in the
  log and folds them before anything else, from the state before them;
* failures: a failed fold fails the query at its next batch (`submit` raises), and the
  service checks `failure` meanwhile; the batch stays in the log, so a restart folds it again;
* stopping: whoever stops the query calls `close` after it, which waits for the last fold;
  whoever waits for a batch's outputs calls `flush` once Spark reports the batch done.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from pyspark.sql import DataFrame

from pipeline_stages._windowing.batch.engine import BatchInput, BatchWindow
from pipeline_stages._windowing.batch.input_log import INPUT_DIR, InputLog

log = logging.getLogger("sluice.window")

#: What a folded batch's envelopes are handed to: `(batch id, envelopes, input counts)`.
Write = Callable[[int, list[Any], dict[str, Any] | None], None]
#: Reads the input counts of the batch in progress (`_engine.observed.InputMetrics`).
InputCounts = Callable[[int], dict[str, Any] | None]


class WindowFoldError(RuntimeError):
    """A batch's fold failed; the batch stays logged and is folded again on restart."""


class FoldPipeline:
    """Reads each batch in `foreachBatch` and folds it in the background (module doc)."""

    def __init__(
        self, window: BatchWindow, write: Write, *, input_counts: InputCounts | None = None
    ) -> None:
        self.window = window
        self.write = write
        #: Read right after each batch is read, and logged and folded with it.
        self.input_counts = input_counts
        #: The input log; None when the engine keeps its state in memory (no recovery).
        self.log = InputLog(window.state_dir / INPUT_DIR) if window.state_dir else None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sluice-fold")
        self._folding: tuple[int, Future[None]] | None = None
        self._recovered = False

    def submit(self, batch: DataFrame, batch_id: int) -> None:
        """Read and log one micro-batch, and have it folded once the previous one is."""
        self._raise_failure()
        if not self._recovered:
            self._recover(batch, batch_id)
        read = self.window.read(batch, batch_id)
        if self.input_counts is not None:
            read = dataclasses.replace(read, input=self.input_counts(batch_id))
        if self.log is not None:
            self.log.write(read)
        self.flush()
        self._folding = (batch_id, self._executor.submit(self._fold, read))

    def flush(self) -> None:
        """Wait until every batch handed over is folded and written; raise a failed fold's
        error (`WindowFoldError`)."""
        if self._folding is not None:
            self._folding[1].exception()
        self._raise_failure()

    def close(self) -> BaseException | None:
        """Wait for the last fold (the query has stopped) and release the thread; returns a
        failed fold's error rather than raising it: the batch stays logged."""
        if self._folding is not None:
            self._folding[1].exception()
        self._executor.shutdown(wait=True)
        return self.failure

    @property
    def failure(self) -> BaseException | None:
        """The error of the last fold, once it has failed."""
        if self._folding is None or not self._folding[1].done():
            return None
        return self._folding[1].exception()

    # ------------------------------------------------------------------ internals

    def _fold(self, read: BatchInput) -> None:
        self.write(read.batch_id, self.window.fold(read), read.input)
        if self.log is not None:
            self.log.remove(read.batch_id)

    def _raise_failure(self) -> None:
        error = self.failure
        if error is not None and self._folding is not None:
            batch_id = self._folding[0]
            raise WindowFoldError(f"the window fold of batch {batch_id} failed: {error}") from error

    def _recover(self, batch: DataFrame, first_id: int) -> None:
        """Fold the batches a previous run logged but did not fold, before `first_id`;
        forget the others, which Spark hands over again."""
        self._recovered = True
        if self.log is None:
            return
        for batch_id in self.log.batch_ids():
            if batch_id < first_id:
                log.info("folding logged micro-batch %d before %d", batch_id, first_id)
                self._fold(self.log.read(batch_id, batch.sparkSession))
            else:
                self.log.remove(batch_id)
