"""What one pane of a fixed window holds and emits (issue 25; `runtime.panes` decides when
panes fire; the rules of record are tests/conformance/reference_panes.py).

* `accumulating`: the window's content so far; `discarding`: the content since the window's
  previous pane, which is emptied after each fired pane;
* `onlyUpdatedPanes` (accumulating): of the window's content, only the `$group` groups that
  received a document since the window's previous pane (a window without `$group` is one
  group). The updated groups per window are kept in `FixedState.pane_updated`;
* a pane that emits nothing is not fired: it takes no index and changes nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.emit import Emitter, Segment
from pipeline_stages._windowing.runtime.inner import InnerRuntime

EARLY, ON_TIME, LATE = "EARLY", "ON_TIME", "LATE"


class PaneFirer:
    """Folds documents into fixed windows and fires their panes (see the module docstring).

    Args:
        spec: The window's panes.
        inner: The inner pipeline's runtime (folds and emits contents).
        out: Where results go.
        windows: The open windows' contents (`FixedState.windows`).
        size: The windows' size in ms.
        updated: Per open window, the groups updated since its previous pane (normalised
            `$group` keys; None for a window without `$group`), kept with
            `onlyUpdatedPanes` only (`FixedState.pane_updated`).
    """

    def __init__(
        self,
        spec: C.PaneSpec,
        inner: InnerRuntime,
        out: Emitter,
        windows: dict[int, Any],
        size: int,
        updated: dict[int, set[Any]],
    ) -> None:
        self.spec = spec
        self.inner = inner
        self.out = out
        self.windows = windows
        self.size = size
        self.only_updated = spec.only_updated and spec.mode != "discarding"
        self.updated = updated

    def admit(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
    ) -> None:
        """Fold admitted rows (`rows[i]` into window `starts[i]`), noting the groups they
        update (`onlyUpdatedPanes`)."""
        if not self.only_updated or not len(rows):
            self.inner.admit(self.windows, seg, rows, starts, orders)
            return
        if self.inner.group is None:
            self.inner.admit(self.windows, seg, rows, starts, orders)
            for start in np.unique(starts).tolist():
                self.updated.setdefault(start, set()).add(None)
            return
        self.inner.touched = set()
        try:
            self.inner.admit(self.windows, seg, rows, starts, orders)
            for start, norm in self.inner.touched:
                self.updated.setdefault(start, set()).add(norm)
        finally:
            self.inner.touched = None

    def content(self, start: int) -> Any:
        """What the window's next pane runs its inner pipeline over."""
        content = self.windows[start]
        if not self.only_updated:
            return content
        updated = self.updated.get(start, set())
        if self.inner.group is None:
            return content if None in updated else []
        return {norm: group for norm, group in content.items() if norm in updated}

    def fire(self, start: int, timing: str, counts: list[int], *, part: int, seq: int) -> bool:
        """Fire the window's next pane (`counts[0]`: its index), attributed to the source
        position `(seq, part)`; False when it emits nothing (not fired: nothing changes)."""
        before = self.out.results
        self.inner.emit(
            self.content(start), start=start, end=start + self.size, part=part, seq=seq,
            pane={"index": counts[0], "timing": timing},
        )  # fmt: skip
        if self.out.results == before:
            return False
        counts[0] += 1
        counts[1] = 0
        self.forget_since(start)
        return True

    def forget_since(self, start: int) -> None:
        """A phase of the window ended (a fired pane, its ON_TIME point): a discarding window
        drops its content, and no group of it counts as updated any more."""
        if self.spec.mode == "discarding":
            self.windows[start] = self.inner.new_content()
        self.updated.pop(start, None)

    def drop(self, start: int) -> None:
        """The window closed: forget what its panes kept."""
        self.updated.pop(start, None)
