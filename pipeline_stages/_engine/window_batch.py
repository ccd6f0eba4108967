"""The batch window engine: lateness decided first, documents folded where they are.

An alternative to the window operator (`window_operator`, `applyInPandasWithState`) for the
tumbling and hopping windows it can run exactly; chosen with the Spark conf
`spark.sluice.window.engine=batch` (`window_compile`). It rests on one observation: a
document's lateness depends only on the event times that arrived before it, so a
micro-batch's lateness can be decided before its documents are read. Per micro-batch, inside
the query's `foreachBatch` (`ForeachBatchSink`):

1. job 1 collects the narrow columns (position, event time, flag) and the driver runs the
   operator's clock over them (`Clock.running`): the watermark before and after every source
   position, and so the `minWindowStartTime` in force when each arrived (`MinOpenSteps`);
2. job 2 runs `window_batch_map` on every input partition, in parallel: late records and
   in-window failures as DLQ envelopes, admitted documents folded into partial `$group`
   states per (window, group key). A late document's DLQ copy (`to_json`) is only computed
   for rows that may be late; the operator computes it for every document, because it only
   learns lateness after the shuffle;
3. the driver merges the partials into its open windows and closes, in start order, those
   the batch's last watermark passed, attributing each to the position that closed it.

The windows' arithmetic, folds, merges and emission are the operator's own (`FixedWindows`,
`InnerRuntime`), so the results are the operator's, whatever the batch size.

State (the clock and the open windows) lives in the driver and is saved per batch id, in
the directory the query's sink is given (`bind`; the query's checkpoint by default): a batch
starts from the state of the latest batch before it. Spark replays an unfinished batch with
its id and data after a crash, so the replay recomputes the same outputs from the same state,
and the sink is idempotent on batch id. Without a directory the state is kept in memory (no
recovery).

What it runs (`ineligible`): `$tumblingWindow`/`$hoppingWindow` on event time whose inner
pipeline starts with `$group` (any accumulators, stateless stages before it, blocking stages
after it), from a source with one partition, with nothing but the sink after the window,
and no wall-clock rule (`idleTimeout`, `partitionIdleTimeout`, processing time): state in the
driver has no Spark timeouts to wake it. Anything else runs on the operator.
"""

from __future__ import annotations

import os
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline_stages._engine import window_config as C
from pipeline_stages._engine.frame import EVENT_MS, PART, SEQ, SUB
from pipeline_stages._engine.window_batch_map import (
    BLOB_SCHEMA,
    MinOpenSteps,
    Partial,
    map_partitions,
)
from pipeline_stages._engine.window_clock import Clock
from pipeline_stages._engine.window_emit import Emitter, Segment
from pipeline_stages._engine.window_fixed import FixedState, FixedWindows
from pipeline_stages._engine.window_operator import sort_rows, stats_doc

ENGINE_CONF = "spark.sluice.window.engine"
ENGINES = ("operator", "batch")
_STATE_VERSION = 1
_STATE_SUFFIX = ".state"
#: At most this many `WHEN`s decide which rows may be late (more steps are coarsened).
_MAX_STEPS = 64


def ineligible(spec: C.OperatorSpec, *, has_suffix: bool) -> str | None:
    """Why the batch engine cannot run this window (None: it can; see the module doc)."""
    if spec.kind != "fixed":
        return "only $tumblingWindow and $hoppingWindow"
    if spec.processing_time or spec.idle_timeout_ms is not None:
        return "windows closing on the wall clock (processingTime, idleTimeout)"
    if spec.source.partition_idle_timeout_ms is not None or spec.source.partitions != 1:
        return "sources with more than one partition"
    if spec.inner.group is None or spec.inner.exploded or has_suffix:
        return "inner pipelines that do not start with $group, or read the window in it"
    if spec.bucket_count != 1:
        return "spark.sluice.window.buckets > 1"
    return None


class BatchWindow:
    """The engine for one query (see the module docstring); `run` is called per batch."""

    def __init__(self, spec: C.OperatorSpec, compact: DataFrame) -> None:
        self.spec = spec
        #: The streaming frame the query runs: the operator's input columns.
        self.compact = compact
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

    def run(self, batch: DataFrame, batch_id: int) -> list[tuple[Any, ...]]:
        """The batch's envelope rows (`window_emit.ENVELOPE_COLUMNS`), state saved."""
        spec = self.spec
        clock, state = self._load(batch_id)
        out = Emitter(spec.source)
        core = FixedWindows(spec, state if state is not None else FixedState(), clock, out)
        narrow = batch.select(PART, SEQ, SUB, C.DOC_SUB, EVENT_MS, C.FLAG).toPandas()
        narrow = narrow[narrow[C.FLAG].to_numpy() != C.FLAG_CLOCK]
        self.last_input_rows = len(narrow)
        if len(narrow):
            now = int(time.time() * 1000)
            seg = Segment.of(sort_rows([narrow.reset_index(drop=True)]), now)
            clock.start(now, spec.source.partitions)
            clock.last_input_ms = now
            first = seg.pos_rows
            counted = seg.flag[first] != C.FLAG_SOURCE_FAILED
            before, after = clock.running(seg.part[first], seg.ts[first], counted, None)
            lateness = spec.allowed_lateness_ms
            min_open = np.maximum.accumulate(
                np.maximum(core.oldest_start(before - lateness), core.state.min_open)
            )
            for partial in self._partials(batch, min_open_steps(seg.seq[first], min_open)):
                merge_partial(core, partial, out)
            core.close_due(seg, after - lateness)
            clock.last_seq, clock.last_part = int(seg.seq[first[-1]]), int(seg.part[first[-1]])
        blob = self._save(batch_id, clock, core.state)
        starts = core.open_starts()
        stats = stats_doc(0, clock, starts, len(blob), out)
        out.stats(stats, part=clock.last_part, seq=clock.last_seq)
        return out.rows

    def _partials(self, batch: DataFrame, steps: MinOpenSteps) -> Iterator[Partial]:
        """Job 2: every partition's partial, in arrival order."""
        may_be_late = self._may_be_late(steps)
        shipped = batch.withColumn(C.ORIG, F.when(may_be_late, F.col(C.ORIG)))
        rows = shipped.mapInPandas(map_partitions(self.spec, steps), BLOB_SCHEMA).collect()
        partials = [pickle.loads(row["blob"]) for row in rows]  # noqa: S301 - our own workers
        yield from sorted(partials, key=lambda p: p.first_seq)

    def _may_be_late(self, steps: MinOpenSteps) -> Column:
        """True for every row that may miss a window (and needs its DLQ copy): its earliest
        window starts before the `minWindowStartTime` in force. Above `_MAX_STEPS` steps,
        ranges of steps use their largest value, which can only say "may" more often."""
        geometry = self.spec.geometry
        assert isinstance(geometry, C.FixedGeometry)  # noqa: S101 - `ineligible` checked
        size, hop, offset = geometry.interval_ms, geometry.hop_ms, geometry.offset_ms
        t = F.col(EVENT_MS)
        oldest = F.greatest(t - size + hop - F.pmod(t - offset, F.lit(hop)), F.lit(0))
        seqs, values = steps.seqs, steps.values
        cuts = np.linspace(0, len(seqs), min(len(seqs), _MAX_STEPS) + 1).astype(int)
        bounds = [(seqs[a], values[b - 1]) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
        min_open: Column = F.lit(bounds[0][1])
        for seq, value in bounds[1:]:
            min_open = F.when(F.col(SEQ) >= seq, F.lit(value)).otherwise(min_open)
        return oldest < min_open

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


def min_open_steps(seqs: npt.NDArray[np.int64], min_open: npt.NDArray[np.int64]) -> MinOpenSteps:
    """The step function of per-position `min_open` (non-decreasing) over `seqs`."""
    change = np.flatnonzero(np.r_[True, min_open[1:] != min_open[:-1]])
    return MinOpenSteps(tuple(seqs[change].tolist()), tuple(min_open[change].tolist()))


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
