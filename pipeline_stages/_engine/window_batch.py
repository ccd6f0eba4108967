"""The batch window engine: windows in the driver, documents folded where they are.

An alternative to the window operator (`window_operator`, `applyInPandasWithState`) for the
tumbling and hopping windows it can run exactly; chosen with the Spark conf
`spark.sluice.window.engine=batch` (`window_compile`). Per micro-batch, inside the query's
`foreachBatch` (`ForeachBatchSink`):

1. one Spark job runs `window_batch_map` over the batch in one partition, handed the state's
   clock: the watermark before every document in arrival order, late records and in-window
   failures as DLQ envelopes, and the admitted documents folded into partial `$group` states
   per (window, group key);
2. the driver merges the partials into its open windows and closes, in start order, those
   the batch's last watermark passed, attributing each to the position that closed it.

The windows' arithmetic, folds, merges and emission are the operator's own (`FixedWindows`,
`InnerRuntime`), so the results are the operator's, whatever the batch size. What it saves
against the operator: the shuffle to the operator's bucket and Spark's state store (it still
pickles its whole state to a file per batch). What it does not do yet: aggregate on-time
documents natively (see `benchmarks/window_cutoff_spike.py`); its folds run in Python on one
core, as the operator's do.

State (the clock and the open windows) lives in the driver and is saved per batch id in the
directory its sink was given (`bind`): a batch starts from the state of the latest batch
before it. Spark replays an unfinished batch with its id and data after a crash, so the
replay recomputes the same outputs from the same state, and the sinks are idempotent on
batch id. Without a directory the state is kept in memory (no recovery).

What it runs (`ineligible`): `$tumblingWindow`/`$hoppingWindow` on event time whose inner
pipeline starts with `$group` (any accumulators; stateless stages before it, any stages after
it), from a source known to have one partition, and no wall-clock rule (`idleTimeout`,
`partitionIdleTimeout`, processing time): state in the driver has no Spark timeouts to wake
it. Anything else runs on the operator. Stages after the window's `$group` (inside the window
or after it) run per micro-batch on its results (`after`, one small Spark job), compiled
again on that batch's frame.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame

from pipeline_stages._engine import window_config as C
from pipeline_stages._engine.envelope import ENVELOPE_SCHEMA
from pipeline_stages._engine.window_batch_map import BLOB_SCHEMA, Partial, map_batch
from pipeline_stages._engine.window_clock import Clock
from pipeline_stages._engine.window_emit import ENVELOPE_COLUMNS, Emitter
from pipeline_stages._engine.window_fixed import FixedState, FixedWindows
from pipeline_stages._engine.window_operator import stats_doc

ENGINE_CONF = "spark.sluice.window.engine"
ENGINES = ("operator", "batch")
_STATE_VERSION = 1
_STATE_SUFFIX = ".state"


def ineligible(spec: C.OperatorSpec) -> str | None:
    """Why the batch engine cannot run this window (None: it can; see the module doc)."""
    if spec.kind != "fixed":
        return "only $tumblingWindow and $hoppingWindow"
    if spec.processing_time or spec.idle_timeout_ms is not None:
        return "windows closing on the wall clock (processingTime, idleTimeout)"
    if spec.source.partition_idle_timeout_ms is not None or spec.source.partitions != 1:
        return "sources not known to have one partition, or with partitionIdleTimeout"
    if spec.inner.group is None or spec.inner.exploded:
        return "inner pipelines that do not start with $group, or read the window before it"
    if spec.bucket_count != 1:
        return "spark.sluice.window.buckets > 1"
    return None


class BatchWindow:
    """The engine for one query (see the module docstring); `run` is called per batch."""

    def __init__(self, spec: C.OperatorSpec, compact: DataFrame, suffix: tuple[Any, ...]) -> None:
        self.spec = spec
        #: The streaming frame the query runs: the operator's input columns.
        self.compact = compact
        #: The inner stages after the first blocking one(s) (`window_inner.InnerStage`).
        self.suffix = suffix
        #: The stages after the window (inner suffix, outer stages, the sink's computed
        #: targets) as a function of the window's envelopes, compiled per batch (`plan`).
        self.after: Callable[[DataFrame], DataFrame] | None = None
        self.state_dir: Path | None = None
        self._memory: dict[int, bytes] = {}
        #: Rows of the latest micro-batch (what the query's progress counts once per job).
        self.last_input_rows = 0

    def bind(self, state_dir: str | Path | None) -> None:
        """Keep the state in `state_dir` (created when missing); None keeps it in memory."""
        self.state_dir = Path(state_dir) if state_dir is not None else None
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ one micro-batch

    def envelopes(self, batch: DataFrame, batch_id: int) -> list[Any]:
        """The batch's envelopes as the sink reads them (`dict`s or `Row`s): the window's,
        through the stages after it when there are any."""
        rows = self.run(batch, batch_id)
        if self.after is None:
            return [dict(zip(ENVELOPE_COLUMNS, row, strict=True)) for row in rows]
        frame = batch.sparkSession.createDataFrame(rows, ENVELOPE_SCHEMA)
        return self.after(frame).collect()

    def run(self, batch: DataFrame, batch_id: int) -> list[tuple[Any, ...]]:
        """The batch's envelope rows (`window_emit.ENVELOPE_COLUMNS`), state saved."""
        spec = self.spec
        clock, state = self._load(batch_id)
        state = state if state is not None else FixedState()
        now = int(time.time() * 1000)
        # One partition: arrival order runs through the whole batch (the operator's single
        # bucket sees the whole batch too).
        mapper = map_batch(spec, clock, state.min_open, now)
        found = batch.coalesce(1).mapInPandas(mapper, BLOB_SCHEMA).collect()
        partial: Partial | None = pickle.loads(found[0]["blob"]) if found else None  # noqa: S301
        if partial is not None:
            clock = partial.clock
        out = Emitter(spec.source)
        core = FixedWindows(spec, state, clock, out)
        self.last_input_rows = 0
        if partial is not None:
            self.last_input_rows = partial.rows
            merge_partial(core, partial, out)
            core.close_due(partial.steps.segment(), partial.steps.adjusted)
        blob = self._save(batch_id, clock, core.state)
        stats = stats_doc(0, clock, core.open_starts(), len(blob), out)
        out.stats(stats, part=clock.last_part, seq=clock.last_seq)
        return out.rows

    # ------------------------------------------------------------------ state

    def _load(self, batch_id: int) -> tuple[Clock, FixedState | None]:
        """The state after the latest batch before `batch_id` (a fresh one at first)."""
        blob = self._blob_before(batch_id)
        if blob is None:
            return Clock(), None
        version, clock, state = pickle.loads(blob)  # noqa: S301 - written by `_save`
        if version != _STATE_VERSION:
            raise RuntimeError(f"batch window state version {version} is not {_STATE_VERSION}")
        return clock, state

    def _blob_before(self, batch_id: int) -> bytes | None:
        if self.state_dir is None:
            earlier = [n for n in self._memory if n < batch_id]
            return self._memory[max(earlier)] if earlier else None
        earlier = [n for n in self._saved_ids() if n < batch_id]
        return (self.state_dir / _state_name(max(earlier))).read_bytes() if earlier else None

    def _saved_ids(self) -> list[int]:
        assert self.state_dir is not None  # noqa: S101
        names = (p.name for p in self.state_dir.iterdir() if p.name.endswith(_STATE_SUFFIX))
        return [int(name[: -len(_STATE_SUFFIX)]) for name in names]

    def _save(self, batch_id: int, clock: Clock, state: FixedState) -> bytes:
        """Save the state after `batch_id`; keep the one before it (a replay of `batch_id`
        starts there), drop older ones."""
        blob = pickle.dumps((_STATE_VERSION, clock, state), protocol=pickle.HIGHEST_PROTOCOL)
        if self.state_dir is None:
            self._memory = {n: b for n, b in self._memory.items() if n == batch_id - 1}
            self._memory[batch_id] = blob
            return blob
        path = self.state_dir / _state_name(batch_id)
        partial = path.with_suffix(".tmp")
        with partial.open("wb") as handle:
            handle.write(blob)
            handle.flush()
            os.fsync(handle.fileno())
        partial.replace(path)
        for old in self._saved_ids():
            if old < batch_id - 1 or old > batch_id:
                (self.state_dir / _state_name(old)).unlink(missing_ok=True)
        return blob


def _state_name(batch_id: int) -> str:
    return f"{batch_id:020d}{_STATE_SUFFIX}"


def merge_partial(core: FixedWindows, partial: Partial, out: Emitter) -> None:
    """Merge one partition's partial windows into the open windows; keep its envelopes."""
    group = core.inner.group
    assert group is not None  # noqa: S101 - `ineligible` checked
    windows = core.state.windows
    for start, content in partial.windows.items():
        mine = windows.get(start)
        if mine is None:
            windows[start] = content
            continue
        for norm, entry in content.items():
            group.merge_into(mine, norm, entry)
    out.rows.extend(partial.envelopes)
    out.dlq_count += len(partial.envelopes)
