"""The batch window engine: the window operator's code run per micro-batch in the driver.

An alternative to the window operator (`runtime.operator`, `applyInPandasWithState`), chosen
with the Spark conf `spark.sluice.window.engine=batch` (`spark.compile`). Per micro-batch,
inside the query's `foreachBatch` (`ForeachBatchSink`), the batch's rows (the operator's input
columns) come to the driver through Arrow (`read`), and the driver runs on them exactly what
the operator's single bucket runs (`sort_rows`, `segments`, `run_segment` on the window kind's
core), against state it keeps itself (`fold`). The results are the operator's, whatever the
batch size. The sink folds a batch in the background while Spark reads the next one
(`batch.pipelining`); `envelopes` does both in turn.

What it saves against the operator: the shuffle to the operator's bucket, Spark's state
store (it saves its own state to files per batch, see below), and the JSON text of every
document's DLQ copy: it reads the batch as Arrow (`shipped_rows`), so the copies stay VARIANT
binaries and only late documents are rendered. What it does not do yet:
aggregate on-time documents natively (see `benchmarks/window_cutoff_spike.py`); its folds run
in Python on one core, as the operator's do. The batch is held in the driver's memory, as it
is in the operator's Python worker.

State (the clock and the window core's state) is saved per batch id in the directory its sink
was given (`bind`), as a snapshot or, for tumbling and hopping windows, a delta of the groups
the batch folded into or the documents it buffered (`batch.state`): a batch starts
from the state of the latest batch before it (kept live in memory from one batch to the next,
read back from the files after a restart or a replay). Spark replays an unfinished batch with
its id and data after a crash, so the replay recomputes the same outputs from the same state,
and the sinks are idempotent on batch id. Without a directory the state is kept in memory (no
recovery).

What it runs (`ineligible`): every window kind and inner pipeline the operator runs, as one
bucket, without a wall-clock rule (`idleTimeout`, `partitionIdleTimeout`, a processing-time
boundary): state in the driver has no Spark timeout to wake it when no input comes. Those run
on the operator. Stages after the window's first blocking stage (inside the window or after
it) run per micro-batch on its results (`after`, one small Spark job), compiled again on that
batch's frame; whoever needs that job's observed metrics (the enrichment stages' operator
stats) is handed the job's DataFrame after it ran (`after_job`).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import VariantVal

from pipeline_stages._stream.envelope import ENVELOPE_SCHEMA
from pipeline_stages._stream.frame import EVENT_MS
from pipeline_stages._stream.json_text import value_json, variant_value
from pipeline_stages._windowing.batch.state import (
    FixedDelta,
    StateFiles,
    buffered_lengths,
    read_snapshot,
    snapshot,
)
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.emit import ENVELOPE_COLUMNS, Emitter, late_doc
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.operator import (
    make_core,
    run_segment,
    segments,
    sort_rows,
    stats_doc,
)
from pipeline_stages._windowing.runtime.stamp import Stamp
from pipeline_stages._windowing.runtime.stamp import stamp as stamped

ENGINE_CONF = "spark.sluice.window.engine"
ENGINES = ("operator", "batch")
#: Whether a row ships a late-document copy (`C.ORIG`); see `shipped_columns`.
HAS_COPY = "__w_has_copy"


def ineligible(spec: C.OperatorSpec) -> str | None:
    """Why the batch engine cannot run this window (None: it can; see the module doc)."""
    if (
        spec.processing_time
        or spec.idle_timeout_ms is not None
        or spec.source.partition_idle_timeout_ms is not None
    ):
        return "closes on the wall clock (idleTimeout, partitionIdleTimeout, processingTime)"
    if spec.bucket_count != 1:
        return "spark.sluice.window.buckets > 1"
    return None


@dataclass(frozen=True)
class BatchInput:
    """One micro-batch as the engine read it (`BatchWindow.read`), ready to fold."""

    batch_id: int
    #: The shipped columns (`shipped_columns`), as Arrow.
    table: pa.Table
    #: The batch's processing time (ms since the epoch), taken when it was read.
    now_ms: int
    #: The query's session, for the stages after the window.
    session: SparkSession
    #: The source's records and bytes read by the batch (`BatchResult.input`), if known.
    input: dict[str, Any] | None = None


class BatchWindow:
    """The engine for one query (see the module docstring); `run` is called per batch."""

    def __init__(
        self,
        spec: C.OperatorSpec,
        compact: DataFrame,
        suffix: tuple[Any, ...],
        stamp: Stamp | None = None,
    ) -> None:
        self.spec = spec
        #: `(tsFieldName, streamMetaFieldName)` when the input documents are the source's
        #: unstamped ones (`spark.unstamped`): late copies are stamped when rendered.
        self.stamp = stamp
        #: The streaming frame the query runs: the operator's input columns.
        self.compact = compact
        #: The inner stages after the first blocking one(s) (`spark.inner.InnerStage`).
        self.suffix = suffix
        #: The stages after the window (inner suffix, outer stages, the sink's computed
        #: targets) as a function of the window's envelopes, compiled per batch (`plan`).
        self.after: Callable[[DataFrame], DataFrame] | None = None
        #: Called with `(batch id, the job's DataFrame)` once the stages after the window have
        #: run on a batch (the sink reads the job's observed metrics there).
        self.after_job: Callable[[int, DataFrame], None] | None = None
        self.state_dir: Path | None = None
        self._files: StateFiles | None = None
        self._memory: dict[int, bytes] = {}
        #: `(batch id, clock, core state)` after the last batch that ran to the end: the next
        #: batch starts from it without reading and unpickling the saved copy.
        self._live: tuple[int, Clock, Any] | None = None
        #: The batch whose saved state the running batch started from (None: none).
        self._base: int | None = None
        #: Whether batches save deltas (`batch.state`): tumbling and hopping windows
        #: (`benchmarks/window_state_saves.py` turns it off to compare).
        self.deltas = spec.kind == "fixed"

    def bind(self, state_dir: str | Path | None) -> None:
        """Keep the state in `state_dir` (created when missing); None keeps it in memory.
        A query bound anew (a restart) starts from what the directory holds."""
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self._live = None
        self._files = None
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._files = StateFiles(self.state_dir, InnerRuntime(self.spec).new_content)

    # ------------------------------------------------------------------ one micro-batch

    def envelopes(self, batch: DataFrame, batch_id: int) -> list[Any]:
        """The batch's envelopes as the sink reads them (`dict`s or `Row`s): the window's,
        through the stages after it when there are any."""
        return self.fold(self.read(batch, batch_id))

    def read(self, batch: DataFrame, batch_id: int) -> BatchInput:
        """The batch's rows in the driver (one Spark job): what `fold` needs, so the batch
        can be folded after `foreachBatch` has returned (`batch.input_log`)."""
        return BatchInput(batch_id, batch.toArrow(), int(time.time() * 1000), batch.sparkSession)

    def fold(self, batch: BatchInput) -> list[Any]:
        """`envelopes` of a batch already read: its state saved, the stages after the window
        run (a small Spark job of its own when there are any)."""
        rows = self.run_table(batch.table, batch.batch_id, batch.now_ms)
        if self.after is None:
            return [dict(zip(ENVELOPE_COLUMNS, row, strict=True)) for row in rows]
        job = self.after(batch.session.createDataFrame(rows, ENVELOPE_SCHEMA))
        found = job.collect()
        if self.after_job is not None:
            self.after_job(batch.batch_id, job)
        return found

    def run(self, batch: DataFrame, batch_id: int) -> list[tuple[Any, ...]]:
        """The batch's envelope rows (`runtime.emit.ENVELOPE_COLUMNS`), state saved."""
        return self.run_table(batch.toArrow(), batch_id, int(time.time() * 1000))

    def run_table(self, table: pa.Table, batch_id: int, now: int) -> list[tuple[Any, ...]]:
        """`run` on the batch's rows as read (`shipped_columns`), at processing time `now`."""
        spec = self.spec
        clock, core_state = self._load(batch_id)
        out = Emitter(spec.source)
        core = make_core(spec, core_state, clock, out)
        tracked = self.deltas and self._files is not None
        lengths = buffered_lengths(core_state) if tracked else {}
        if tracked:
            core.inner.touched = set()
        rows, doc_text = shipped_rows(table, self.stamp)
        if len(rows):
            # As in the operator: the state's many small lists make cyclic GC passes cost
            # more than the work itself.
            enabled = gc.isenabled()
            gc.disable()
            try:
                for at, segment in segments(sort_rows([rows]), spec, now):
                    run_segment(core, clock, spec, at, segment, doc_text)
            finally:
                if enabled:
                    gc.enable()
        delta = FixedDelta.of(core.state, core.inner.touched, lengths) if tracked else None
        size = self._save(batch_id, clock, core.state, delta)
        self._live = (batch_id, clock, core.state)
        stats = stats_doc(0, clock, core.open_starts(), size, out, inner=spec.inner)
        out.stats(stats, part=clock.last_part, seq=clock.last_seq)
        return out.rows

    # ------------------------------------------------------------------ state

    def _load(self, batch_id: int) -> tuple[Clock, Any]:
        """The state after the latest batch before `batch_id` (a fresh one at first).

        The live state only serves the batch right after it: a replay of its own batch
        starts from the saved state before it, and a batch that failed half-way leaves none
        (its objects may be half-updated)."""
        live, self._live = self._live, None
        if live is not None and live[0] == batch_id - 1:
            self._base = live[0]
            return live[1], live[2]
        self._base = None
        if self._files is not None:
            saved = self._files.before(batch_id)
            if saved is None:
                return Clock(), None
            self._base, clock, state = saved
            return clock, state
        earlier = [n for n in self._memory if n < batch_id]
        if not earlier:
            return Clock(), None
        return read_snapshot(self._memory[max(earlier)])

    def _save(self, batch_id: int, clock: Clock, state: Any, delta: FixedDelta | None) -> int:
        """Save the state after `batch_id` (in memory: keep the one before it too, which a
        replay of `batch_id` starts from); returns its size in bytes."""
        if self._files is not None:
            return self._files.save(batch_id, clock, state, base=self._base, delta=delta)
        blob = snapshot(clock, state)
        self._memory = {n: b for n, b in self._memory.items() if n == batch_id - 1}
        self._memory[batch_id] = blob
        return len(blob)


def shipped_columns(columns: list[str], stamp: Stamp | None = None) -> list[Column]:
    """The engine's input: the operator's columns (`spark.compile._shipped`), with the
    late-document copy kept a VARIANT (see `shipped_rows`) that is never SQL NULL, because
    PySpark's `toArrow` declares a VARIANT's two binaries non-nullable and fails on a null
    one; `HAS_COPY` says whether the row has a copy. With `stamp`, the copy's stream
    metadata (`C.OMETA`) too."""
    variants = (C.ORIG, C.OMETA) if stamp is not None else (C.ORIG,)
    null = F.parse_json(F.lit("null"))
    shipped = [
        F.coalesce(F.col(name), null).alias(name) if name in variants else F.col(name)
        for name in columns
    ]
    return [*shipped, F.col(C.ORIG).isNotNull().alias(HAS_COPY)]


def shipped_rows(
    table: pa.Table, stamp: Stamp | None = None
) -> tuple[pd.DataFrame, Callable[[Any], str | None]]:
    """The batch's rows as pandas, and the renderer of their late-document copies.

    The copies (`C.ORIG`, one VARIANT per healthy document) stay Arrow binaries: their cells
    are row numbers into them (None: no copy), and only a late document is ever rendered
    (`late_doc`), stamped first with `stamp` (`runtime.stamp`). `to_json` of every document
    in Spark plus a Python string each was ~30 % of a 125k-row batch
    (`benchmarks/RESULTS.md`); converting the VARIANTs to pandas would build a `VariantVal`
    per row."""
    variants = [C.ORIG, C.OMETA] if stamp is not None else [C.ORIG]
    docs = table.column(C.ORIG).combine_chunks()
    present = table.column(HAS_COPY).to_numpy()
    rows = table.drop_columns([*variants, HAS_COPY]).to_pandas()
    cells = np.arange(len(docs)).astype(object)  # row numbers; None: no copy
    cells[~present] = None
    rows.insert(table.column_names.index(C.ORIG), C.ORIG, cells)
    if not len(docs):
        return rows, late_doc
    #: `(stamp, stream metadata, event times)` of the copies, when they are stamped.
    stamping: tuple[Stamp, Any, Any] | None = None
    if stamp is not None:
        metas = table.column(C.OMETA).combine_chunks()
        stamping = (stamp, metas, table.column(EVENT_MS).to_numpy())

    def variant(column: pa.StructArray, cell: int) -> Any:
        value, metadata = column.field("value")[cell], column.field("metadata")[cell]
        return variant_value(VariantVal(value.as_py(), metadata.as_py()))

    def doc_text(cell: Any) -> str | None:
        if cell is None:
            return None
        doc = variant(docs, cell)
        if stamping is not None and isinstance(doc, dict):
            (ts_field, meta_field), metas, event_ms = stamping
            meta = variant(metas, cell)
            doc = stamped(
                doc,
                event_ms=int(event_ms[cell]),
                meta=meta,
                ts_field=ts_field,
                meta_field=meta_field,
            )
        return late_doc(value_json(doc))

    return rows, doc_text
