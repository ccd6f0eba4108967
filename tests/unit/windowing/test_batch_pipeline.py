"""`batch.pipelining`: folds in batch order behind the reads, logged until folded (no
Spark: an engine that records what it folds stands in for `BatchWindow`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from pipeline_stages._windowing.batch.engine import BatchInput
from pipeline_stages._windowing.batch.input_log import INPUT_DIR, InputLog
from pipeline_stages._windowing.batch.pipelining import FoldPipeline, WindowFoldError


@dataclass
class Batch:
    """What `foreachBatch` hands over: here, the rows' values and a session."""

    values: list[int]
    sparkSession: Any = "session"  # noqa: N815 - PySpark's name


@dataclass
class RecordingWindow:
    """Reads a batch into an Arrow table; folds by recording it (optionally after `gate`)."""

    state_dir: Path | None
    folded: list[tuple[int, list[int]]] = field(default_factory=list)
    gate: threading.Event | None = None
    fails_at: int | None = None

    def read(self, batch: Batch, batch_id: int) -> BatchInput:
        return BatchInput(batch_id, pa.table({"v": batch.values}), 1000 + batch_id, None)

    def fold(self, batch: BatchInput) -> list[Any]:
        if self.gate is not None:
            assert self.gate.wait(10), "the test never opened the gate"
        if batch.batch_id == self.fails_at:
            raise ValueError("boom")
        values = batch.table.column("v").to_pylist()
        self.folded.append((batch.batch_id, values))
        return [{"batch": batch.batch_id, "now": batch.now_ms}]


def logged(state_dir: Path) -> list[int]:
    return InputLog(state_dir / INPUT_DIR).batch_ids()


def test_a_batch_is_logged_before_submit_returns_and_folded_after_it(tmp_path: Path) -> None:
    gate = threading.Event()
    window = RecordingWindow(tmp_path, gate=gate)
    written: list[tuple[int, list[Any]]] = []
    folds = FoldPipeline(window, lambda n, rows, counts: written.append((n, rows)))  # type: ignore[arg-type]

    folds.submit(Batch([1, 2]), 0)  # type: ignore[arg-type]
    assert logged(tmp_path) == [0]  # committed by Spark from here on: it must survive a crash
    assert written == []  # the fold waits behind the gate, the query goes on
    gate.set()
    folds.flush()
    assert written == [(0, [{"batch": 0, "now": 1000}])]
    assert logged(tmp_path) == []
    assert folds.close() is None


def test_batches_fold_in_order_one_at_a_time(tmp_path: Path) -> None:
    window = RecordingWindow(tmp_path)
    folds = FoldPipeline(window, lambda n, rows, counts: None)  # type: ignore[arg-type]
    for batch_id in range(20):
        folds.submit(Batch([batch_id, batch_id + 1]), batch_id)  # type: ignore[arg-type]
    folds.close()
    assert window.folded == [(n, [n, n + 1]) for n in range(20)]
    assert logged(tmp_path) == []


def test_a_start_folds_the_logged_batches_before_the_first_one_spark_hands_over(
    tmp_path: Path,
) -> None:
    # A crash after Spark committed batches 3 and 4 but before they were folded; batch 5 was
    # logged but not committed, so Spark hands it over again.
    log = InputLog(tmp_path / INPUT_DIR)
    for batch_id in (3, 4, 5):
        log.write(BatchInput(batch_id, pa.table({"v": [batch_id * 10]}), 1000 + batch_id, None))
    window = RecordingWindow(tmp_path)
    written: list[tuple[int, list[Any]]] = []
    folds = FoldPipeline(window, lambda n, rows, counts: written.append((n, rows)))  # type: ignore[arg-type]

    folds.submit(Batch([55]), 5)  # type: ignore[arg-type]
    folds.close()
    assert window.folded == [(3, [30]), (4, [40]), (5, [55])]  # 5 as handed over again
    # The logged batches keep the processing time they were read at.
    assert [rows[0]["now"] for _, rows in written] == [1003, 1004, 1005]
    assert logged(tmp_path) == []


def test_a_failed_fold_fails_the_next_batch_and_stays_logged(tmp_path: Path) -> None:
    window = RecordingWindow(tmp_path, fails_at=1)
    folds = FoldPipeline(window, lambda n, rows, counts: None)  # type: ignore[arg-type]
    folds.submit(Batch([1]), 0)  # type: ignore[arg-type]
    folds.submit(Batch([2]), 1)  # type: ignore[arg-type]
    with pytest.raises(WindowFoldError, match="batch 1 failed: boom"):
        folds.flush()
    assert isinstance(folds.failure, ValueError)
    with pytest.raises(WindowFoldError, match="batch 1"):
        folds.submit(Batch([3]), 2)  # type: ignore[arg-type]
    assert isinstance(folds.close(), ValueError)
    assert window.folded == [(0, [1])]
    assert logged(tmp_path) == [1]  # folded again when the query restarts

    again = RecordingWindow(tmp_path)
    restarted = FoldPipeline(again, lambda n, rows, counts: None)  # type: ignore[arg-type]
    restarted.submit(Batch([3]), 2)  # type: ignore[arg-type]
    restarted.close()
    assert again.folded == [(1, [2]), (2, [3])]


def test_in_memory_state_keeps_no_log() -> None:
    window = RecordingWindow(None)
    folds = FoldPipeline(window, lambda n, rows, counts: None)  # type: ignore[arg-type]
    folds.submit(Batch([7]), 0)  # type: ignore[arg-type]
    folds.close()
    assert folds.log is None
    assert window.folded == [(0, [7])]


def test_a_batchs_input_counts_are_logged_with_it_and_reach_the_write(tmp_path: Path) -> None:
    # Read inside `foreachBatch` (before Spark commits the batch), written with the batch's
    # outputs after the fold, also when the fold happens after a crash and a restart.
    counts = {0: {"count": 2, "bytes": 20}, 1: {"count": 1, "bytes": 9}}
    gate = threading.Event()
    window = RecordingWindow(tmp_path, gate=gate)
    folds = FoldPipeline(
        window,
        lambda n, rows, got: None,  # type: ignore[arg-type]
        input_counts=lambda batch_id: counts[batch_id],
    )
    folds.submit(Batch([1, 2]), 0)  # type: ignore[arg-type]
    assert InputLog(tmp_path / INPUT_DIR).read(0, None).input == counts[0]  # type: ignore[arg-type]
    folds._executor.shutdown(wait=False, cancel_futures=True)  # the process dies here
    written: list[tuple[int, dict[str, int] | None]] = []
    restarted = FoldPipeline(
        RecordingWindow(tmp_path),
        lambda n, rows, got: written.append((n, got)),  # type: ignore[arg-type]
        input_counts=lambda batch_id: counts[batch_id],
    )
    restarted.submit(Batch([3]), 1)  # type: ignore[arg-type]
    restarted.close()
    gate.set()
    assert written == [(0, counts[0]), (1, counts[1])]
