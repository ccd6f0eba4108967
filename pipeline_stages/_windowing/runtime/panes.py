"""Panes of tumbling and hopping windows in the operator (issue 25; the rules of record are
the reference model's, tests/conformance/reference_panes.py).

A window with `trigger` fires *panes*: each runs the window's inner pipeline over the pane's
content and stamps `_stream_meta.window.pane: {index, timing}` on what it emits. This module
decides *when* panes fire (`C.PaneSpec`, the subset compile lets through); `pane_firing`
decides what one holds and emits:

* **EARLY** (`early: {count: N}`): right after the N-th document that reached the window since
  its previous pane. Documents are counted per window in arrival order when they enter it
  (before the inner stages: one the inner `$match` drops or fails counts too), so the fold
  of a segment is cut at each window's count boundaries and panes do not depend on the
  micro-batch size. `early: {every: d}` (processing time): the first document that reaches
  the window since its previous pane sets the window's timer to `now + d`; the pane fires
  at the start of the first segment whose processing time reached it (`fire_due`: before
  that segment's documents, before idleTimeout closes, after partition-idleness rises,
  as the reference model orders its clock). A timer pane that emits nothing is not fired,
  and the next document sets the timer again;
* **ON_TIME**: without `late`, when the window closes by Atlas's rule (the fixed core's
  `_close`). With `late` (the Beam model), at the first watermark change that reaches the
  window's end (`W >= end`), after the documents of that source position; the window stays
  open until Atlas's rule closes it;
* **LATE** (`late: {count: N}` or `{every: d}`): after the ON_TIME pane, counted or timed as
  EARLY is (the ON_TIME pane drops the window's EARLY timer); when the window finally
  closes, a last LATE pane if documents reached it since its previous pane;
* a pane that emits nothing is not fired: it takes no index and the window's count and
  content stay as they were (the next document tries again).

The pane state (`PaneCounts`, per window start) lives in `FixedState.panes` and the timers in
`FixedState.pane_timers`, so a restart from the checkpoint continues each window's index,
count, phase and timer.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.emit import Segment
from pipeline_stages._windowing.runtime.pane_firing import (
    EARLY,
    LATE,
    ON_TIME,
    PaneFirer,
)
from pipeline_stages._windowing.runtime.pane_state import ON_TIME_DONE, SINCE, PaneCounts

#: A fire attempt in the segment's loop: `(document, kind, window, pair)`; at one document,
#: count attempts (kind 0) come before the ON_TIME pane of a watermark change (kind 1).
_COUNT, _REACH = 0, 1


def document_index(seg: Segment, rows: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per row of `rows` (arrival order), the index of its document among the segment's
    documents `(seq, part, doc_sub)`; the rows of one document are adjacent (`sort_rows`)."""
    doc_sub = seg.df[C.DOC_SUB].to_numpy()[rows]
    seq, part = seg.seq[rows], seg.part[rows]
    new = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        new[1:] = (seq[1:] != seq[:-1]) | (part[1:] != part[:-1]) | (doc_sub[1:] != doc_sub[:-1])
    return np.cumsum(new) - 1


class FixedPanes:
    """Fires the panes of one operator's fixed windows (see the module docstring)."""

    def __init__(
        self,
        spec: C.PaneSpec,
        firer: PaneFirer,
        counts: dict[int, PaneCounts],
        timers: dict[int, int],
    ) -> None:
        self.spec = spec
        self.firer = firer
        self.windows = firer.windows
        self.counts = counts
        #: Per window start, the processing time its `every` pane fires at (`fire_due`).
        self.timers = timers
        self.size = firer.size

    def trigger_count(self, start: int) -> int | None:
        """The count of the window's current phase (EARLY before its ON_TIME pane, else LATE)."""
        return self.spec.late_count if self.counts[start][ON_TIME_DONE] else self.spec.early_count

    def every_ms(self, start: int) -> int | None:
        """The `every` period of the window's current phase (None: it fires on counts)."""
        late = self.counts[start][ON_TIME_DONE]
        return self.spec.late_every_ms if late else self.spec.early_every_ms

    def arm(self, starts: list[int], now: int) -> None:
        """Documents reached windows `starts` in their current phase at processing time
        `now`: each window without a timer whose phase fires on the clock sets one."""
        for start in starts:
            every = self.every_ms(start)
            if every is not None and start not in self.timers:
                self.timers[start] = now + every

    def fire_due(self, now: int, *, part: int, seq: int) -> None:
        """Processing time reached `now`: fire the panes whose timer is due, in start order
        (attributed to the latest source position `(seq, part)`, as idle closes are)."""
        for start in sorted(s for s, due in self.timers.items() if due <= now):
            del self.timers[start]
            counts = self.counts.setdefault(start, [0, 0, 0])
            timing = LATE if counts[ON_TIME_DONE] else EARLY
            self.firer.fire(start, timing, counts, part=part, seq=seq)

    def next_due(self) -> int | None:
        """The earliest timer (the operator's wake-up), None without one."""
        return min(self.timers.values(), default=None)

    def admit(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        reached: npt.NDArray[np.bool_],
        items: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]],
        *,
        watermarks: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    ) -> None:
        """Fold the admitted items (`items = (item_rows, item_k, orders)`: `rows[item_rows]`
        into `starts[item_rows, item_k]`) in arrival order, firing the count panes and, with
        `late`, the ON_TIME panes of the watermark changes (`watermarks`: per position, the
        watermark before and after it) where they fall.

        `reached[i, k]`: row `i`'s document reached window `starts[i, k]` (admitted or not:
        every document that enters counts)."""
        item_rows, item_k, orders = items
        fresh = {s for s in np.unique(starts[reached]).tolist() if s not in self.counts}
        for start in fresh:
            self.counts[start] = [0, 0, 0]
        if not self.spec.has_count and not self.spec.has_late:
            self.firer.admit(seg, rows[item_rows], starts[item_rows, item_k], orders)
            if self.spec.uses_clock:
                self.arm(np.unique(starts[reached]).tolist(), seg.now)
            return
        docs = document_index(seg, rows)
        pair_rows, pair_k = np.nonzero(reached)
        pair_starts = starts[pair_rows, pair_k]
        reach = self._reaches(seg, rows[pair_rows], pair_starts, fresh, watermarks)
        window_starts = np.unique(np.concatenate([pair_starts, np.array(list(reach), np.int64)]))
        _Loop(self, seg, rows, starts, docs, (item_rows, item_k, orders)).run(
            window_starts, pair_rows, pair_starts, reach
        )

    def _reaches(
        self,
        seg: Segment,
        pair_rows: npt.NDArray[np.int64],
        pair_starts: npt.NDArray[np.int64],
        fresh: set[int],
        watermarks: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
    ) -> dict[int, int]:
        """With `late`: per window whose ON_TIME pane the segment fires, the position of the
        watermark change that reaches its end (the first one at or after the window's first
        document, as the reference model sees the window only from then on)."""
        before, after = watermarks
        if not self.spec.has_late:
            return {}
        changed = np.flatnonzero(after > before)
        if not len(changed):
            return {}
        top = int(after[changed[-1]])
        reach: dict[int, int] = {}
        for start in sorted(self.windows):
            counts = self.counts.setdefault(start, [0, 0, 0])
            if counts[ON_TIME_DONE] or start + self.size > top:
                continue
            at = int(np.searchsorted(after[changed], start + self.size, side="left"))
            entered = seg.pos[pair_rows[pair_starts == start]]
            if start in fresh and len(entered):
                first = int(entered.min())
                at = max(at, int(np.searchsorted(changed, first, side="left")))
            if at < len(changed):
                reach[start] = int(changed[at])
        return reach

    def reach_end(self, start: int, *, part: int, seq: int) -> None:
        """The watermark reached the window's end: its ON_TIME pane (the `late` model); the
        window's count restarts for its LATE panes whether the pane fired or not."""
        counts = self.counts[start]
        self.timers.pop(start, None)
        if not self.firer.fire(start, ON_TIME, counts, part=part, seq=seq):
            self.firer.forget_since(start)
        counts[ON_TIME_DONE] = 1
        counts[SINCE] = 0

    def rise(self, watermark: int, *, part: int, seq: int) -> None:
        """The watermark rose outside a document: the ON_TIME panes it reaches (`late`)."""
        if not self.spec.has_late:
            return
        for start in sorted(self.windows):
            counts = self.counts.setdefault(start, [0, 0, 0])
            if start + self.size <= watermark and not counts[ON_TIME_DONE]:
                self.reach_end(start, part=part, seq=seq)

    def close(self, start: int, content: Any, *, part: int, seq: int) -> None:
        """The window closes (already popped with `content`): its ON_TIME pane, or with `late`
        after it, a last LATE pane if documents reached the window since its previous pane."""
        self.windows[start] = content
        counts = self.counts.setdefault(start, [0, 0, 0])
        try:
            if not counts[ON_TIME_DONE]:
                self.firer.fire(start, ON_TIME, counts, part=part, seq=seq)
            elif counts[SINCE]:
                self.firer.fire(start, LATE, counts, part=part, seq=seq)
        finally:
            self.windows.pop(start, None)
            self.counts.pop(start, None)
            self.timers.pop(start, None)
            self.firer.drop(start)


class _Loop:
    """One segment's fire attempts over its (window, document) pairs (`FixedPanes.admit`).

    Fire attempts go through a heap by arrival, then kind, then window start: a fired pane's
    next attempt is the phase's count of documents on, one not fired tries again at the next
    document; with `late`, the ON_TIME pane ends a window's EARLY attempts and starts its
    LATE ones."""

    def __init__(
        self,
        panes: FixedPanes,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        docs: npt.NDArray[np.int64],
        items: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]],
    ) -> None:
        self.panes = panes
        self.seg = seg
        self.rows = rows
        self.starts = starts
        self.docs = docs
        self.items = items
        self.item_docs = docs[items[0]]
        self.admitted = 0

    def admit_through(self, doc: int) -> None:
        """Fold the items of the documents up to `doc`."""
        upto = int(np.searchsorted(self.item_docs, doc, side="right"))
        if upto > self.admitted:
            item_rows, item_k, orders = self.items
            take = slice(self.admitted, upto)
            self.panes.firer.admit(
                self.seg, self.rows[item_rows[take]], self.starts[item_rows[take], item_k[take]],
                orders[take],
            )  # fmt: skip
            self.admitted = upto

    def run(
        self,
        window_starts: npt.NDArray[np.int64],
        pair_rows: npt.NDArray[np.int64],
        pair_starts: npt.NDArray[np.int64],
        reach: dict[int, int],
    ) -> None:
        """Fire the segment's panes in order, folding the items up to each."""
        n_docs = int(self.docs[-1]) + 1 if len(self.docs) else 1
        window_ids = np.searchsorted(window_starts, pair_starts)
        pair_keys, first = np.unique(window_ids * n_docs + self.docs[pair_rows], return_index=True)
        self.pair_docs, pair_windows = pair_keys % n_docs, pair_keys // n_docs
        self.pair_row = pair_rows[first]
        self.bounds = np.searchsorted(pair_windows, np.arange(len(window_starts) + 1)).tolist()
        self.window_starts = window_starts.tolist()
        row_pos = self.seg.pos[self.rows]
        # Per window, `base`: the pair index its count restarts after (the count at pair j is
        # j - base); `limit`: the pair index its current phase's attempts stop at.
        self.base: list[int] = []
        self.limit: list[int] = []
        self.reach_pos: dict[int, int] = {}
        #: Per window whose ON_TIME pane the segment fires, its first pair after that pane.
        self.split: dict[int, int] = {}
        heap: list[tuple[int, int, int, int]] = []
        for w, start in enumerate(self.window_starts):
            lo, hi = self.bounds[w], self.bounds[w + 1]
            self.base.append(lo - 1 - self.panes.counts[start][SINCE])
            self.limit.append(hi)
            if start in reach:
                pos = reach[start]
                last = int(np.searchsorted(row_pos, pos, side="right")) - 1
                doc = int(self.docs[last]) if last >= 0 else -1
                self.limit[w] = lo + int(np.searchsorted(self.pair_docs[lo:hi], doc, "right"))
                self.split[w] = self.limit[w]
                self.reach_pos[w] = pos
                heap.append((doc, _REACH, w, self.limit[w]))
            self._push(heap, w, self.base[w], first=lo)
        heapq.heapify(heap)
        while heap:
            doc, kind, w, at = heapq.heappop(heap)
            self.admit_through(doc)
            if kind == _REACH:
                self._reach(heap, w, at)
            else:
                self._count(heap, w, at)
        for w, start in enumerate(self.window_starts):
            self.panes.counts[start][SINCE] = self.bounds[w + 1] - 1 - self.base[w]
        self.admit_through(n_docs - 1)
        if self.panes.spec.uses_clock:
            # A window whose ON_TIME pane fired here has its LATE phase from that pane on.
            phase_from = [self.split.get(w, self.bounds[w]) for w in range(len(self.window_starts))]
            armed = [
                start
                for w, start in enumerate(self.window_starts)
                if phase_from[w] < self.bounds[w + 1]
            ]
            self.panes.arm(armed, self.seg.now)

    def _push(
        self, heap: list[tuple[int, int, int, int]], w: int, after: int, *, first: int
    ) -> None:
        """Queue window `w`'s next count attempt, `trigger` pairs after pair `after`."""
        every = self.panes.trigger_count(self.window_starts[w])
        if every is None:
            return
        at = max(after + every, first)
        if at < self.limit[w]:
            heapq.heappush(heap, (int(self.pair_docs[at]), _COUNT, w, at))

    def _count(self, heap: list[tuple[int, int, int, int]], w: int, at: int) -> None:
        start = self.window_starts[w]
        counts = self.panes.counts[start]
        counts[SINCE] = at - self.base[w]
        r = int(self.rows[self.pair_row[at]])
        timing = LATE if counts[ON_TIME_DONE] else EARLY
        seg = self.seg
        if self.panes.firer.fire(start, timing, counts, part=int(seg.part[r]), seq=int(seg.seq[r])):
            self.base[w] = at
            self._push(heap, w, at, first=at + 1)
        elif at + 1 < self.limit[w]:
            heapq.heappush(heap, (int(self.pair_docs[at + 1]), _COUNT, w, at + 1))

    def _reach(self, heap: list[tuple[int, int, int, int]], w: int, at: int) -> None:
        start = self.window_starts[w]
        r = int(self.seg.pos_rows[self.reach_pos[w]])
        self.panes.reach_end(start, part=int(self.seg.part[r]), seq=int(self.seg.seq[r]))
        self.base[w] = at - 1
        self.limit[w] = self.bounds[w + 1]
        self._push(heap, w, at - 1, first=at)


__all__ = ["FixedPanes", "document_index"]
