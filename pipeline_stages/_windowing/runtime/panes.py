"""Panes of tumbling and hopping windows in the operator (issue 25; the rules of record are
the reference model's, tests/conformance/reference_panes.py).

A window with `trigger` fires *panes*: each runs the window's inner pipeline over the pane's
content and stamps `_stream_meta.window.pane: {index, timing}` on what it emits. This module
fires the subset compile lets through (`C.PaneSpec`):

* **EARLY** (`early: {count: N}`): right after the N-th document that reached the window since
  its previous pane. Documents are counted per window in arrival order when they enter it
  (before the inner stages: one the inner `$match` drops or fails counts too), so the fold
  of a segment is cut at each window's count boundaries and panes do not depend on the
  micro-batch size;
* **ON_TIME**: when the window closes by Atlas's rule (the fixed core's `_close`);
* a pane that emits nothing is not fired: it takes no index and the window's count and
  content stay as they were (the next document tries again);
* `accumulating` keeps the window's content across panes; `discarding` empties it after each
  fired pane.

The pane state (`PaneCounts`, per window start) lives in `FixedState.panes`, so a restart from
the checkpoint continues each window's index and count.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.emit import Emitter, Segment
from pipeline_stages._windowing.runtime.inner import InnerRuntime

EARLY, ON_TIME = "EARLY", "ON_TIME"

#: Per window start: `[index of the next pane, documents since the previous pane]` (a list,
#: not a dataclass: the state pickles thousands of them per micro-batch).
PaneCounts = list[int]


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
        inner: InnerRuntime,
        out: Emitter,
        windows: dict[int, Any],
        counts: dict[int, PaneCounts],
        size: int,
    ) -> None:
        self.spec = spec
        self.inner = inner
        self.out = out
        self.windows = windows
        self.counts = counts
        self.size = size

    def admit(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        reached: npt.NDArray[np.bool_],
        item_rows: npt.NDArray[np.int64],
        item_k: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
    ) -> None:
        """Fold the admitted items (`rows[item_rows]` into `starts[item_rows, item_k]`) in
        arrival order, firing an EARLY pane where a window's count reaches `early_count`.

        `reached[i, k]`: row `i`'s document reached window `starts[i, k]` (admitted or not:
        every document that enters counts)."""
        every = self.spec.early_count
        for start in np.unique(starts[reached]).tolist():
            self.counts.setdefault(start, [0, 0])
        if every is None:
            self.inner.admit(self.windows, seg, rows[item_rows], starts[item_rows, item_k], orders)
            return
        docs = document_index(seg, rows)
        item_docs = docs[item_rows]
        admitted = 0

        def admit_through(doc: int) -> int:
            """Fold the items of the documents up to `doc`; returns the new fold position."""
            upto = int(np.searchsorted(item_docs, doc, side="right"))
            if upto > admitted:
                take = slice(admitted, upto)
                self.inner.admit(
                    self.windows, seg, rows[item_rows[take]],
                    starts[item_rows[take], item_k[take]], orders[take],
                )  # fmt: skip
            return max(upto, admitted)

        # The (window, document) pairs, each once, sorted by window start then arrival.
        pair_rows, pair_k = np.nonzero(reached)
        window_starts, window_ids = np.unique(starts[pair_rows, pair_k], return_inverse=True)
        n_docs = int(docs[-1]) + 1
        pair_keys, first = np.unique(window_ids * n_docs + docs[pair_rows], return_index=True)
        pair_docs, pair_windows = pair_keys % n_docs, pair_keys // n_docs
        pair_row = pair_rows[first]
        bounds = np.searchsorted(pair_windows, np.arange(len(window_starts) + 1)).tolist()
        # Per window, `base`: the pair index its count restarts after (the count at pair j is
        # j - base). Fire attempts go through a heap by arrival, then window start: a fired
        # pane's next attempt is `every` documents on, one not fired tries again at the next.
        base: list[int] = []
        heap: list[tuple[int, int, int]] = []
        for w, start in enumerate(window_starts.tolist()):
            lo, hi = bounds[w], bounds[w + 1]
            base.append(lo - 1 - self.counts[start][1])
            at = max(base[w] + every, lo)
            if at < hi:
                heap.append((int(pair_docs[at]), w, at))
        heapq.heapify(heap)
        while heap:
            doc, w, at = heapq.heappop(heap)
            admitted = admit_through(doc)
            start = int(window_starts[w])
            self.counts[start][1] = at - base[w]
            r = int(rows[pair_row[at]])
            if self.fire(start, EARLY, part=int(seg.part[r]), seq=int(seg.seq[r])):
                base[w] = at
            following = base[w] + every if base[w] == at else at + 1
            if following < bounds[w + 1]:
                heapq.heappush(heap, (int(pair_docs[following]), w, following))
        for w, start in enumerate(window_starts.tolist()):
            self.counts[start][1] = bounds[w + 1] - 1 - base[w]
        admit_through(n_docs - 1)

    def fire(self, start: int, timing: str, *, part: int, seq: int) -> bool:
        """Fire one pane of the window at `start`, attributed to the source position
        `(seq, part)`; False when it emits nothing (not fired: nothing changes)."""
        counts = self.counts.setdefault(start, [0, 0])
        before = self.out.results
        self.inner.emit(
            self.windows[start], start=start, end=start + self.size, part=part, seq=seq,
            pane={"index": counts[0], "timing": timing},
        )  # fmt: skip
        if self.out.results == before:
            return False
        counts[0] += 1
        counts[1] = 0
        if self.spec.mode == "discarding":
            self.windows[start] = self.inner.new_content()
        return True

    def close(self, start: int, content: Any, *, part: int, seq: int) -> None:
        """The window closes (already popped with `content`): its ON_TIME pane."""
        self.windows[start] = content
        try:
            self.fire(start, ON_TIME, part=part, seq=seq)
        finally:
            self.windows.pop(start, None)
            self.counts.pop(start, None)


def pane_counts(state: Any) -> dict[int, PaneCounts]:
    """`state.panes`, added to a state pickled before panes existed."""
    counts: dict[int, PaneCounts] | None = getattr(state, "panes", None)
    if counts is None:
        counts = {}
        state.panes = counts
    return counts


__all__ = ["EARLY", "ON_TIME", "FixedPanes", "PaneCounts", "document_index", "pane_counts"]
