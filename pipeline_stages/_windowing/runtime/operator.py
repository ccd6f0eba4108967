"""The window operator: the function `applyInPandasWithState` calls once per bucket and batch.

One call sees every row of its bucket for the micro-batch, plus the bucket's state (a pickled
blob: the `Clock` and the window kind's state). It sorts the rows in arrival order, cuts them
into processing-time segments, and runs each segment through the window core:

* production: one segment per micro-batch at the batch's processing time. A call without
  rows is an idle segment, and it comes from a `ProcessingTimeTimeout` the previous call set
  (`state_timeout_ms`): when something closes windows or fires panes on the wall clock
  (idleTimeout, partition idleness, processing-time windows, `every` triggers:
  `OperatorSpec.runs_when_idle`), at the next instant that can act. Otherwise only input
  moves the watermark and no timeout is set: the bucket runs only with input (and its query
  runs no micro-batch without input, `session.start_query`). Every call unpickles and rewrites the bucket's whole state, so an
  idle processor no longer pays that per trigger (`benchmarks/window_idle.py`). A new
  query has `ProcessingTimeTimeout` only when such a rule needs it (`spark.compile._timers`):
  with it, Spark calls this function a second time every micro-batch, for timed-out state.
  The timeout mode is part of the state schema, so a checkpoint keeps the one it started
  with (`service.runtime.window_pins`);
* test clock: clock rows (`sources.scripted`) carry virtual processing times; each starts a
  segment, and a clock row followed by no input is an idle segment. Queries then run with
  `NoTimeout`, so no empty micro-batches burn CPU while a test is waiting.

It yields the bucket's envelopes: results of windows that closed, DLQ records, and one stats
row (`openWindows` is what `sluice process` waits on).
"""

from __future__ import annotations

import gc
import pickle
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.emit import Emitter, Segment, late_doc
from pipeline_stages._windowing.runtime.fixed import FixedState, FixedWindows
from pipeline_stages._windowing.runtime.session import SessionState, SessionWindows
from pipeline_stages._windowing.runtime.sliding import SlidingState, SlidingWindows
from pipeline_stages._windowing.runtime.stamp import Stamp, stamp_text
from pipeline_stages._windowing.runtime.values import date_json

STATE_SCHEMA = "blob BINARY"

# PySpark pads this operator's output with all-NA frames and concatenates them, which pandas
# 2.x warns about on every call; the padding is PySpark's and harmless.
warnings.filterwarnings(
    "ignore",
    message="The behavior of DataFrame concatenation with empty or all-NA entries",
    category=FutureWarning,
)
_STATE_VERSION = 1


def make_core(spec: C.OperatorSpec, state: Any, clock: Clock, out: Emitter) -> Any:
    """The window core for the spec's kind, over its state (fresh when None)."""
    if spec.kind == "fixed":
        return FixedWindows(spec, state or FixedState(), clock, out)
    if spec.kind == "session":
        return SessionWindows(spec, state or SessionState(), clock, out)

    return SlidingWindows(spec, state or SlidingState(), clock, out)


def sort_rows(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The call's input chunks as one frame in arrival order: source position, then the
    document, then its window.

    Column by column with numpy: `pd.concat` checks every cell of the (mostly all-None) text
    columns for NA, and `iloc` + `reset_index` copies the frame twice (measured on a 125k-row
    batch in 13 chunks: 0.57 s for concat + sort under cProfile, ~0.1 s here). The input
    usually arrives sorted already, which skips the take.
    """
    columns: dict[str, Any] = {}
    for name in frames[0].columns:
        parts = [f[name] for f in frames]
        if isinstance(parts[0].dtype, np.dtype):
            columns[name] = np.concatenate([p.to_numpy() for p in parts])
        else:  # an extension dtype (nullable ints): keep it
            columns[name] = pd.concat(parts, ignore_index=True).array
    keys = []
    if C.WSTART in columns:
        keys.append(pd.Series(columns[C.WSTART]).fillna(-1).to_numpy(dtype=np.int64))
    keys += [columns["sub"], columns[C.DOC_SUB], columns["part"], columns["seq"]]
    order = np.lexsort(keys)
    if len(order) > 1 and not (np.diff(order) == 1).all():
        columns = {name: values[order] for name, values in columns.items()}
    return pd.DataFrame(columns, copy=False)


def segments(df: pd.DataFrame, spec: C.OperatorSpec, now: int) -> list[tuple[int, pd.DataFrame]]:
    """Cut sorted rows into `(processing time, input rows)` segments (see the module doc)."""
    if not spec.source.test_clock:
        return [(now, df)]
    flags = df[C.FLAG].to_numpy()
    clocks = np.flatnonzero(flags == C.FLAG_CLOCK)
    times = df["event_ms"].to_numpy()
    out = []
    if len(clocks) == 0 or clocks[0] > 0:
        out.append((now, df.iloc[: clocks[0] if len(clocks) else len(df)]))
    for n, at in enumerate(clocks.tolist()):
        end = int(clocks[n + 1]) if n + 1 < len(clocks) else len(df)
        out.append((int(times[at]), df.iloc[at + 1 : end]))
    return out


def run_segment(
    core: Any,
    clock: Clock,
    spec: C.OperatorSpec,
    now: int,
    rows: pd.DataFrame,
    doc_text: Callable[[Any], str | None] = late_doc,
) -> None:
    """One segment: let processing time pass, then process the input (or the idleness).
    `doc_text` renders a late document's shipped copy (`Segment.doc_text`)."""
    timeout = spec.source.partition_idle_timeout_ms
    clock.start(now, spec.source.partitions)
    clock.advance_to(now, timeout, core.on_rise)
    if spec.panes is not None and spec.panes.uses_clock:
        core.on_clock(now)  # `every` panes: fixed and session windows (`spark.panes.pane_spec`)
    if not len(rows):
        if spec.processing_time:
            core.processing_time_tick(now)
        else:
            core.idle()
        return
    clock.last_input_ms = now
    seg = Segment.of(rows, now, doc_text)
    if spec.processing_time:
        seg.ts = np.full(len(seg.ts), now, dtype=np.int64)
    first = seg.pos_rows
    counted = ~np.isin(seg.flag[first], C.UNCOUNTED)
    before, after = clock.running(seg.part[first], seg.ts[first], counted, timeout)
    core.segment(seg, before, after)
    clock.last_seq, clock.last_part = int(seg.seq[first[-1]]), int(seg.part[first[-1]])


def state_timeout_ms(spec: C.OperatorSpec, core: Any, now: int) -> int | None:
    """How long the bucket may go uncalled while it gets no input: the processing-time
    timeout to set (None: none, the bucket waits for input).

    The bucket sleeps until the first instant an input-less call would change something
    (`wake_instants`). Spark fires a timeout in the first micro-batch whose time is strictly
    after it, hence the 1 ms: the call comes in the same micro-batch as when every batch
    called the bucket.
    """
    if not spec.runs_when_idle:
        return None
    due = [instant for instant in wake_instants(spec, core) if instant is not None]
    return max(1, min(due) - 1 - now) if due else None


def wake_instants(spec: C.OperatorSpec, core: Any) -> list[int | None]:
    """Per wall-clock rule, the first processing time at which an input-less call would act
    (None: not before new input):

    * processing-time windows: a tick at `now` closes the windows ending at or before
      `now - 1` (`processing_time_tick`), so the earliest open end + 1 ms;
    * `idleTimeout` (event time): the core's next idle close (`idle_wake_ms`);
    * `partitionIdleTimeout`: the next instant a partition turns idle, where the combined
      watermark may rise (`Clock.partition_idle_due_ms`; a rise that closes nothing costs one
      call);
    * `every` triggers: the earliest pane timer (`FixedWindows.clock_wake_ms`).
    """
    if spec.processing_time:
        ends = core.open_ends()
        clock_rule = min(ends) + 1 if ends else None
    else:
        clock_rule = core.idle_wake_ms()
    partition_rule = core.clock.partition_idle_due_ms(spec.source.partition_idle_timeout_ms)
    return [clock_rule, partition_rule, pane_wake(spec, core)]


def pane_wake(spec: C.OperatorSpec, core: Any) -> int | None:
    """When the core's next `every` pane fires (None: no such trigger, or no timer armed)."""
    return core.clock_wake_ms() if spec.fires_panes_on_clock else None


def load_state(state: Any) -> tuple[Clock, Any]:
    """The bucket's clock and core state (fresh ones for a new bucket)."""
    if not state.exists:
        return Clock(), None
    version, clock, core_state = pickle.loads(state.get[0])
    if version != _STATE_VERSION:
        raise RuntimeError(f"window state version {version} is not {_STATE_VERSION}")
    return clock, core_state


def stats_doc(
    bucket: int,
    clock: Clock,
    starts: list[int],
    size: int,
    out: Emitter,
    pane_due: int | None = None,
    *,
    inner: C.InnerPlan,
    dated: bool = True,
) -> dict[str, Any]:
    """The stats row's document; `pane_due`: when the bucket's next `every` pane fires (None:
    not before new input), which `sluice process` waits for at the end of a finite input;
    `inner`: names the operators the stats show the window's state and results under;
    `dated`: False for `$globalWindow`, whose open window has no start to show."""
    return {
        "bucket": bucket,
        "stateOperator": inner.state_operator,
        "resultsOperator": inner.results_operator,
        "openWindows": len(starts),
        "watermark": date_json(clock.combined),
        "stateSize": size,
        "minOpenWindowStartTime": date_json(starts[0]) if starts and dated else None,
        "maxOpenWindowStartTime": date_json(starts[-1]) if starts and dated else None,
        "dlqMessageCount": out.dlq_count,
        "outputMessageCount": out.results,
        "nextPaneDue": date_json(pane_due) if pane_due is not None else None,
    }


def make_operator(
    spec: C.OperatorSpec, stamp: Stamp | None = None
) -> Callable[..., Iterator[pd.DataFrame]]:
    """The function for `applyInPandasWithState` (state schema `STATE_SCHEMA`); `stamp`:
    `(tsFieldName, streamMetaFieldName)` when the input documents are the source's unstamped
    ones (`spark.unstamped`), whose late copies are stamped when rendered (`stamped_copies`)."""

    def operate(
        key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        # The state holds many small lists; cyclic GC passes over them cost more than the
        # work itself, and the operator creates no reference cycles worth collecting.
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield from _operate(key, pdfs, state)
        finally:
            if enabled:
                gc.enable()

    def _operate(
        key: tuple[Any, ...], pdfs: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        frames = [pdf for pdf in pdfs if len(pdf)]
        clock, core_state = load_state(state)
        out = Emitter(spec.source)
        core = make_core(spec, core_state, clock, out)
        now = int(state.getCurrentProcessingTimeMs())
        if frames:
            df = sort_rows(frames)
            doc_text = late_doc if stamp is None else stamped_copies(df, stamp)
            for at, rows in segments(df, spec, now):
                run_segment(core, clock, spec, at, rows, doc_text)
        elif not spec.source.test_clock:
            run_segment(core, clock, spec, now, frames[0].iloc[:0] if frames else pd.DataFrame())
        blob = pickle.dumps((_STATE_VERSION, clock, core.state), protocol=pickle.HIGHEST_PROTOCOL)
        state.update((blob,))
        timeout = state_timeout_ms(spec, core, now)
        if timeout is not None:
            state.setTimeoutDuration(timeout)
        starts = core.open_starts()
        bucket = int(key[0])
        # With groups split, every bucket holds every window (content or not): count them once.
        counted_starts = starts if bucket == 0 or not spec.splits_groups else []
        out.stats(
            stats_doc(
                bucket,
                clock,
                counted_starts,
                len(blob),
                out,
                pane_wake(spec, core),
                inner=spec.inner,
                dated=not spec.is_global,
            ),
            part=clock.last_part,
            seq=clock.last_seq,
        )
        yield out.frame()

    return operate


def stamped_copies(df: pd.DataFrame, stamp: Stamp) -> Callable[[Any], str | None]:
    """The renderer of the late copies of unstamped documents (`stamp`: the stamped fields'
    names): `df`'s copy cells (`C.ORIG`, `to_json` text) become row numbers, so that the
    renderer finds each copy's event time and stream metadata (`C.OMETA`, text) too."""
    texts = df[C.ORIG].to_numpy()
    metas = df[C.OMETA].to_numpy()
    event_ms = df["event_ms"].to_numpy()
    present = pd.notna(texts)
    cells = np.arange(len(df)).astype(object)  # row numbers; None: no copy
    cells[~present] = None
    df[C.ORIG] = cells
    ts_field, meta_field = stamp

    def doc_text(cell: Any) -> str | None:
        if cell is None:
            return None
        stamped = stamp_text(
            texts[cell],
            event_ms=int(event_ms[cell]),
            meta_json=metas[cell],
            ts_field=ts_field,
            meta_field=meta_field,
        )
        return late_doc(stamped)

    return doc_text
