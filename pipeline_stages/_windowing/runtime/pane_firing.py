"""What one pane of a fixed window holds and emits (issue 25; `runtime.panes` decides when
panes fire; the rules of record are tests/conformance/reference_panes.py).

* `accumulating`: the window's content so far; `discarding`: the content since the window's
  previous pane, which is emptied after each fired pane;
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
    """

    def __init__(
        self,
        spec: C.PaneSpec,
        inner: InnerRuntime,
        out: Emitter,
        windows: dict[int, Any],
        size: int,
    ) -> None:
        self.spec = spec
        self.inner = inner
        self.out = out
        self.windows = windows
        self.size = size

    def admit(
        self,
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
    ) -> None:
        """Fold admitted rows (`rows[i]` into window `starts[i]`)."""
        self.inner.admit(self.windows, seg, rows, starts, orders)

    def fire(self, start: int, timing: str, counts: list[int], *, part: int, seq: int) -> bool:
        """Fire the window's next pane (`counts[0]`: its index), attributed to the source
        position `(seq, part)`; False when it emits nothing (not fired: nothing changes)."""
        before = self.out.results
        self.inner.emit(
            self.windows[start], start=start, end=start + self.size, part=part, seq=seq,
            pane={"index": counts[0], "timing": timing},
        )  # fmt: skip
        if self.out.results == before:
            return False
        counts[0] += 1
        counts[1] = 0
        self.forget_since(start)
        return True

    def forget_since(self, start: int) -> None:
        """A phase of the window ended: a discarding window drops its content."""
        if self.spec.mode == "discarding":
            self.windows[start] = self.inner.new_content()

    def drop(self, start: int) -> None:
        """The window closed: forget what its panes kept."""
