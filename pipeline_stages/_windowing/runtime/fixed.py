"""`$tumblingWindow` / `$hoppingWindow` inside the operator (atlas-semantics.md §4.1-§4.5).

Per segment, vectorised over documents in arrival order:

1. the watermark before each document (`runtime.clock`) gives `min_open_start` in force when
   it arrives (§4.4: windows starting before it have closed, an idle close may raise it);
2. a document missing a closed window goes to the DLQ with `missedWindowStartTimes`, and
   into the windows still open (partially late, hopping only); a document in a hop gap goes
   nowhere and is not late;
3. admitted documents fold into their open windows' state: incremental `$group` partials, or
   buffered documents when the inner pipeline needs them;
4. windows whose end the final watermark passed (`W - allowedLateness >= end`) close in start
   order and emit.

Windows exist from their first assigned document (even one `$match` then drops) until they
close; empty windows emit nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.emit import (
    WINDOW_SUB_STEP,
    Emitter,
    Segment,
    late_meta,
)
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.pane_firing import Emitted, PaneFirer
from pipeline_stages._windowing.runtime.pane_state import (
    PaneCounts,
    pane_counts,
    pane_emitted,
    pane_timers,
    pane_updated,
)
from pipeline_stages._windowing.runtime.panes import FixedPanes
from pipeline_stages._windowing.runtime.values import window_meta

_EMPTY = np.zeros(0, dtype=np.int64)
#: `FixedPanes.admit`'s arguments for a segment whose documents entered no window (its
#: watermark changes may still fire ON_TIME panes).
_NOTHING_ENTERED = (
    np.zeros((0, 1), dtype=np.int64),
    np.zeros((0, 1), dtype=bool),
    (_EMPTY, _EMPTY, _EMPTY),
)


@dataclass
class FixedState:
    """Open windows (start -> content) and Atlas's `minWindowStartTime`.

    The batch engine saves what a batch changed in it (`batch.state.FixedDelta`): a
    field added here must be added there too, except the `pane*` fields, which only windows
    with a `trigger` use, and the batch engine refuses those (`spark.panes.pane_spec`)."""

    min_open: int = 0
    windows: dict[int, Any] = field(default_factory=dict)
    #: Pane index and count per open window (`runtime.panes`; windows with `trigger` only).
    panes: dict[int, PaneCounts] = field(default_factory=dict)
    #: Per open window, the groups updated since its previous pane (`onlyUpdatedPanes`).
    pane_updated: dict[int, set[Any]] = field(default_factory=dict)
    #: Per open window and output group, its last emission (`accumulatingAndRetracting`).
    pane_emitted: dict[int, dict[Any, list[Emitted]]] = field(default_factory=dict)
    #: Per open window, the processing time its `every` pane fires at (`trigger.*.every`).
    pane_timers: dict[int, int] = field(default_factory=dict)


class FixedWindows:
    """The fixed-window core; see the module docstring."""

    def __init__(self, spec: C.OperatorSpec, state: FixedState, clock: Clock, out: Emitter) -> None:
        geometry = spec.geometry
        if not isinstance(geometry, WindowGeometry):
            raise TypeError("fixed windows need a WindowGeometry")
        self.geometry = geometry
        self.size, self.hop = geometry.interval_ms, geometry.hop_ms
        self.lateness = spec.allowed_lateness_ms
        self.spec = spec
        self.state = state
        self.clock = clock
        self.out = out
        self.inner = InnerRuntime(spec, out)
        self.panes = (
            None
            if spec.panes is None
            else FixedPanes(
                spec.panes,
                PaneFirer(
                    spec.panes,
                    self.inner,
                    out,
                    state.windows,
                    self.size,
                    pane_updated(state),
                    pane_emitted(state),
                ),
                pane_counts(state),
                pane_timers(state),
            )
        )

    # ------------------------------------------------------------------ arithmetic

    def oldest_start(self, t: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """§4.1 `oldestStart`, clamped at 0."""
        return self.geometry.oldest_start_np(t)

    def grid(self, t: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Candidate window starts per event (`oldest + k * hop`) and which contain it."""
        return self.geometry.grid_np(t)

    # ------------------------------------------------------------------ segments

    def on_rise(self, watermark: int) -> None:
        """The watermark rose outside a document (partition idleness): close what is due
        (with `trigger.late`, first the ON_TIME panes of the windows it reaches)."""
        if self.panes is not None:
            self.panes.rise(watermark, part=self.clock.last_part, seq=self.clock.last_seq)
        self.close_through(watermark - self.lateness, self.clock.last_seq, self.clock.last_part)

    def segment(
        self, seg: Segment, before: npt.NDArray[np.int64], after: npt.NDArray[np.int64]
    ) -> None:
        """Process one segment with input; `before`/`after` are per-position watermarks."""
        seg.emit_failed_before(self.out)
        rows = np.flatnonzero(np.isin(seg.flag, C.ENTERED))
        if len(rows):
            self._entered(seg, rows, (before, after))
        elif self.panes is not None:
            self.panes.admit(seg, rows, *_NOTHING_ENTERED, watermarks=(before, after))
        adjusted_after = after - self.lateness
        self._close_due(seg, adjusted_after)

    def _entered(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        watermarks: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    ) -> None:
        before = watermarks[0]
        adjusted = before[seg.pos[rows]] - self.lateness
        min_open = np.maximum.accumulate(
            np.maximum(self.oldest_start(adjusted), self.state.min_open)
        )
        t = seg.ts[rows]
        starts, contains = self.grid(t)
        is_open = contains & (starts >= min_open[:, None])
        missed = contains & (starts < min_open[:, None])
        self._late(seg, rows, starts, missed)
        for start in np.unique(starts[is_open]).tolist():
            self.state.windows.setdefault(start, self.inner.new_content())
        if self.spec.inner.exploded:
            wstart = seg.df[C.WSTART].to_numpy()[rows]
            assigned = is_open & (starts == wstart[:, None])
        else:
            assigned = is_open
        self._failures(seg, rows, starts, assigned)
        ok = seg.flag[rows] == C.FLAG_OK
        item_rows, item_k = np.nonzero(assigned & ok[:, None])
        orders = self.clock.next_order + item_rows
        self.clock.next_order += len(rows)
        if self.panes is not None:
            items = (item_rows, item_k, orders)
            self.panes.admit(seg, rows, starts, assigned, items, watermarks=watermarks)
            return
        self.inner.admit(
            self.state.windows, seg, rows[item_rows], starts[item_rows, item_k], orders
        )

    def _late(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        missed: npt.NDArray[np.bool_],
    ) -> None:
        """§4.4: one DLQ record per late document (its first row carries the original)."""
        orig = seg.df[C.ORIG].to_numpy()
        doc_sub = seg.df[C.DOC_SUB].to_numpy()
        seen: set[tuple[int, int, int]] = set()
        for i in np.flatnonzero(missed.any(axis=1)).tolist():
            r = int(rows[i])
            ident = (int(seg.seq[r]), int(seg.part[r]), int(doc_sub[r]))
            if orig[r] is None or ident in seen:
                continue  # another row of the same document, or no DLQ configured
            seen.add(ident)
            doc = seg.doc_text(orig[r])
            self.out.dlq(
                part=int(seg.part[r]), seq=int(seg.seq[r]), sub=int(seg.sub[r]),
                event_ms=int(seg.ts[r]), doc=doc, meta=late_meta(doc, self.spec.source),
                reason=C.LATE_REASON, operator=self.spec.inner.first_operator,
                missed=starts[i][missed[i]].tolist(),
            )  # fmt: skip

    def _failures(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        assigned: npt.NDArray[np.bool_],
    ) -> None:
        """Per-document errors inside the window: one DLQ record per open window entered."""
        failed = seg.flag[rows] == C.FLAG_FAILED_INSIDE
        if not failed.any():
            return
        df = seg.df
        docs, metas = df[C.FDOC].to_numpy(), df[C.FMETA].to_numpy()
        reasons, operators = df[C.REASON].to_numpy(), df[C.OPERATOR].to_numpy()
        exploded = self.spec.inner.exploded
        for i in np.flatnonzero(failed).tolist():
            r = int(rows[i])
            for n, start in enumerate(starts[i][assigned[i]].tolist()):
                reason = self.inner.failure_reason(seg, r, reasons[r])
                doc, meta = docs[r], metas[r]
                if not exploded:  # the shipped document does not hold the window yet
                    window = window_meta(start, start + self.size)
                    doc, meta = self.inner.with_window(doc, meta, window)
                self.out.dlq(
                    part=int(seg.part[r]), seq=int(seg.seq[r]),
                    sub=int(seg.sub[r]) + n * WINDOW_SUB_STEP, event_ms=int(seg.ts[r]),
                    doc=doc, meta=meta, reason=reason, operator=operators[r],
                    window_start=start,
                )  # fmt: skip

    def _close_due(self, seg: Segment, adjusted_after: npt.NDArray[np.int64]) -> None:
        limit = (
            int(adjusted_after[-1]) if len(adjusted_after) else self.clock.combined - self.lateness
        )
        due = sorted(s for s in self.state.windows if s + self.size <= limit)
        for start in due:
            at = int(np.searchsorted(adjusted_after, start + self.size, side="left"))
            at = min(at, len(seg.pos_rows) - 1)
            r = int(seg.pos_rows[at])
            self._close(start, int(seg.part[r]), int(seg.seq[r]))
        self._raise_min_open(limit)

    def close_through(self, limit: int, seq: int, part: int) -> None:
        """Close every window with `end <= limit`, attributing results to `(seq, part)`."""
        for start in sorted(s for s in self.state.windows if s + self.size <= limit):
            self._close(start, part, seq)
        self._raise_min_open(limit)

    def _raise_min_open(self, adjusted: int) -> None:
        oldest = int(self.oldest_start(np.array([adjusted], dtype=np.int64))[0])
        self.state.min_open = max(self.state.min_open, oldest)

    def _close(self, start: int, part: int, seq: int) -> None:
        content = self.state.windows.pop(start)
        if self.panes is not None:
            self.panes.close(start, content, part=part, seq=seq)
            return
        if self.spec.splits_groups:
            self.out.begin_window()
        self.inner.emit(content, start=start, end=start + self.size, part=part, seq=seq)

    # ------------------------------------------------------------------ idleness

    def on_clock(self, now: int) -> None:
        """Processing time reached `now`: fire the `every` panes that are due."""
        if self.panes is not None:
            self.panes.fire_due(now, part=self.clock.last_part, seq=self.clock.last_seq)

    def clock_wake_ms(self) -> int | None:
        """When `on_clock` first fires a pane if no input comes (None: not before input)."""
        return None if self.panes is None else self.panes.next_due()

    def idle(self) -> None:
        """§4.5: after `idleTimeout` of source idleness, close the windows that are due."""
        clock = self.clock
        end = clock.idle_close_now(
            self.spec.idle_timeout_ms, self.open_ends(), clock.combined - self.lateness
        )
        if end is not None:
            self.close_through(end, clock.last_seq, clock.last_part)

    def idle_wake_ms(self) -> int | None:
        """When `idle()` first closes a window if no input comes (None: not before input)."""
        return self.clock.idle_wake_ms(
            self.spec.idle_timeout_ms, self.open_ends(), self.clock.combined - self.lateness
        )

    def open_ends(self) -> list[int]:
        """Ends of the open windows (the operator's wake-up arithmetic reads them)."""
        return [s + self.size for s in self.state.windows]

    def processing_time_tick(self, now: int) -> None:
        """Processing-time windows close by the clock: the watermark is `now - 1`."""
        if now - 1 > self.clock.combined:
            self.clock.combined = now - 1
            self.clock.advanced = True
        self.close_through(self.clock.combined, self.clock.last_seq, self.clock.last_part)

    def open_starts(self) -> list[int]:
        """Starts of the open windows."""
        return sorted(self.state.windows)
