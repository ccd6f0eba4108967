"""Fixed-window arithmetic for `$tumblingWindow` and `$hoppingWindow`, in integer milliseconds.

Everything here follows atlas-semantics.md §4 exactly; the section is cited on each function.
Times are milliseconds since the Unix epoch (UTC) and durations are milliseconds, as plain
`int`s, so the same functions serve the pure-Python reference executor and, through the
`*_np` variants, the vectorised Spark operator.

Vocabulary:
    W   the watermark: max event time seen - 1 ms, monotonic (§4.2), see `watermark.py`.
    L   allowedLateness; `W' = W - L` is the "lateness-adjusted" watermark (§4.3).
    min_open_start   the smallest window start still open; every window that starts before it
        has closed (§4.4, the engine's `minWindowStartTime`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.sessions import (
    SessionSpan,
    merge_session_spans,
    session_closes,
    session_is_late,
    sessions_mergeable,
)
from pipeline_stages._windowing.sliding import SlidingGeometry
from pipeline_stages._windowing.watermark import PartitionWatermarks, idle_close_end

__all__ = [
    "Lateness",
    "PartitionWatermarks",
    "SessionSpan",
    "SlidingGeometry",
    "Window",
    "WindowGeometry",
    "closes",
    "closes_np",
    "idle_close_end",
    "merge_session_spans",
    "min_open_starts_np",
    "running_watermark_np",
    "session_closes",
    "session_is_late",
    "sessions_mergeable",
]

#: The watermark before any event: §4.2 "It is monotonic and starts at -1".
INITIAL_WATERMARK = -1


@dataclass(frozen=True, order=True)
class Window:
    """A half-open event-time window `[start, end)` in epoch milliseconds (§4.1)."""

    start: int
    end: int

    def contains(self, t: int) -> bool:
        """§4.1 `windowContains`: `start <= t < end`; an event at `end` is in the next window."""
        return self.start <= t < self.end


class Lateness(StrEnum):
    """How a document relates to the open windows when it arrives (§4.4)."""

    ON_TIME = "on_time"
    #: Some windows containing `t` closed, some are open: DLQ *and* add to the open ones.
    PARTIAL = "partial"
    #: Every window containing `t` closed: DLQ only.
    LATE = "late"
    #: `t` is in a hop gap (`hop > interval`): no window contains it; dropped, not DLQ'd.
    GAP = "gap"


#: The length of `$globalWindow`'s window: 2**51 ms, ~71,000 years from the epoch, past the
#: year 9999 (253,402,300,799,999 ms) that dates end at, and far inside a 64-bit integer.
GLOBAL_SPAN_MS = 2**51


@dataclass(frozen=True)
class WindowGeometry:
    """The window grid of a hopping window; tumbling is the case `hop_ms == interval_ms`.

    Attributes:
        interval_ms: window length (> 0).
        hop_ms: distance between consecutive window starts (> 0); `hop > interval` leaves gaps.
        offset_ms: `offset.offsetFromUtc` in ms; window *ends* are aligned to it modulo `hop`.
    """

    interval_ms: int
    hop_ms: int
    offset_ms: int = 0

    def __post_init__(self) -> None:
        if self.interval_ms <= 0 or self.hop_ms <= 0:
            raise ValueError(
                f"interval and hop must be > 0 ms, got interval={self.interval_ms} hop={self.hop_ms}"
            )

    @classmethod
    def global_window(cls) -> WindowGeometry:
        """`$globalWindow`'s one window over all time: a tumbling window from the epoch, longer
        than any date Sluice reads (years 1 to 9999), so no watermark reaches its end; it also
        holds the dates before the epoch (`window_starts`, `grid_np`), which the §4.1 clamp
        leaves out of Atlas's windows."""
        return cls.tumbling(GLOBAL_SPAN_MS)

    @property
    def is_global(self) -> bool:
        """Whether this is `global_window()`: its results carry no start or end."""
        return self.interval_ms >= GLOBAL_SPAN_MS

    @classmethod
    def tumbling(cls, interval_ms: int, offset_ms: int = 0) -> WindowGeometry:
        """Tumbling windows are hopping windows whose hop equals the interval."""
        return cls(interval_ms=interval_ms, hop_ms=interval_ms, offset_ms=offset_ms)

    # ------------------------------------------------------------------ scalar arithmetic

    def oldest_start(self, t: int) -> int:
        """§4.1 `oldestStart(t) = t - interval + hop - ((t - offset) mod hop)`, clamped at >= 0.

        For `t` inside some window this is the start of the oldest window containing it; for `t`
        in a hop gap it is the start of the next window after `t` (greater than `t`). The clamp
        is the engine's: near the epoch it yields a window that is not on the grid.
        """
        start = t - self.interval_ms + self.hop_ms - ((t - self.offset_ms) % self.hop_ms)
        return max(start, 0)

    def end_of(self, start: int) -> int:
        """The end of the window starting at `start`."""
        return start + self.interval_ms

    def next_start(self, start: int) -> int:
        """The start of the window after the one starting at `start`."""
        return start + self.hop_ms

    def window_starts(self, t: int) -> list[int]:
        """Starts of all windows containing `t`, oldest first (§4.1); empty in a hop gap."""
        if self.is_global:  # the one window holds every date, before the epoch too
            return [0]
        starts = []
        start = self.oldest_start(t)
        while start <= t:
            if t < self.end_of(start):
                starts.append(start)
            start = self.next_start(start)
        return starts

    def windows_of(self, t: int) -> list[Window]:
        """All windows containing `t`, oldest first."""
        return [Window(s, self.end_of(s)) for s in self.window_starts(t)]

    def min_open_start(self, adjusted_watermark: int) -> int:
        """§4.4: after a watermark step, `minWindowStartTime = oldestStart(W')`."""
        return self.oldest_start(adjusted_watermark)

    def missed_starts(self, t: int, min_open_start: int) -> list[int]:
        """§4.4 `missedWindowStartTimes`: closed windows that would have contained `t`.

        Walks the grid from `oldestStart(t)` while the start is both below `min_open_start`
        (closed) and not after `t`; a gap document has none (its `oldestStart` is after it).
        """
        missed = []
        start = self.oldest_start(t)
        while start < min_open_start and start <= t:
            missed.append(start)
            start = self.next_start(start)
        return missed

    def open_starts(self, t: int, min_open_start: int) -> list[int]:
        """Starts of the still-open windows that a document at `t` goes into (§4.4)."""
        return [s for s in self.window_starts(t) if s >= min_open_start]

    def classify(self, t: int, min_open_start: int) -> Lateness:
        """§4.4 fully late / partially late / on time, plus the gap case of §4.1."""
        containing = self.window_starts(t)
        if not containing:
            return Lateness.GAP
        if containing[0] >= min_open_start:
            return Lateness.ON_TIME
        if containing[-1] >= min_open_start:
            return Lateness.PARTIAL
        return Lateness.LATE

    def windows_per_event(self, t: int) -> int:
        """How many windows contain `t`: ⌊interval/hop⌋ or ⌈interval/hop⌉ off the gaps (§4.1)."""
        return len(self.window_starts(t))

    # ------------------------------------------------------------------ vectorised variants

    def oldest_start_np(self, ts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """`oldest_start` over an int64 array (numpy's `%` is floor modulo, like Python's)."""
        ts = np.asarray(ts, dtype=np.int64)
        start = ts - self.interval_ms + self.hop_ms - np.mod(ts - self.offset_ms, self.hop_ms)
        return np.maximum(start, 0)

    def grid_np(
        self, ts: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Candidate window starts per event (`oldest + k * hop`) and which of them contain it.

        At most ceil(interval / hop) + 1 grid points lie in [oldest, t]: one column each.
        """
        ts = np.asarray(ts, dtype=np.int64)
        if self.is_global:  # the one window holds every date: the epoch clamp must not drop
            # dates before 1970 as it does for Atlas's windows (§4.1)
            return np.zeros((len(ts), 1), dtype=np.int64), np.ones((len(ts), 1), dtype=np.bool_)
        k_max = -(-self.interval_ms // self.hop_ms) + 1
        ks = np.arange(k_max, dtype=np.int64)
        starts = self.oldest_start_np(ts)[:, None] + ks[None, :] * self.hop_ms
        contains = (starts <= ts[:, None]) & (ts[:, None] < starts + self.interval_ms)
        return starts, contains

    def assign_np(
        self, ts: npt.NDArray[np.int64], min_open_start: int | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Explode events into (row index, window start) pairs, oldest window first per row.

        Args:
            ts: event times (ms).
            min_open_start: when given, windows starting before it (closed) are left out.

        Returns:
            `(rows, starts)`: parallel int64 arrays; row `i` of `ts` appears once per window.
        """
        ts = np.asarray(ts, dtype=np.int64)
        starts, keep = self.grid_np(ts)
        if min_open_start is not None:
            keep &= starts >= min_open_start
        rows = np.broadcast_to(np.arange(len(ts), dtype=np.int64)[:, None], starts.shape)
        return rows[keep], starts[keep]

    def late_mask_np(
        self, ts: npt.NDArray[np.int64], min_open_start: npt.NDArray[np.int64] | int
    ) -> npt.NDArray[np.bool_]:
        """True where the event missed at least one closed window (fully or partially late).

        `min_open_start` may be an array: the value in force when each row arrived, which is
        how per-document lateness in arrival order is vectorised (§4.2 note in the brief).
        """
        ts = np.asarray(ts, dtype=np.int64)
        oldest = self.oldest_start_np(ts)
        return (oldest < min_open_start) & (oldest <= ts)


def running_watermark_np(
    ts: npt.NDArray[np.int64], watermark: int = INITIAL_WATERMARK
) -> tuple[npt.NDArray[np.int64], int]:
    """The watermark in force *before* each row, in arrival order, and the one after the last.

    §4.2 for one partition (`max event time - 1 ms`, monotonic), starting from `watermark`.
    Deciding lateness against the value before each row is what makes results independent of
    the micro-batch size. For a partitioned source, combine per-partition values first.
    """
    ts = np.asarray(ts, dtype=np.int64)
    if len(ts) == 0:
        return np.empty(0, dtype=np.int64), watermark
    after = np.maximum.accumulate(np.maximum(ts - 1, watermark))
    before = np.concatenate((np.array([watermark], dtype=np.int64), after[:-1]))
    return before, int(after[-1])


def min_open_starts_np(
    geometry: WindowGeometry,
    watermarks_before: npt.NDArray[np.int64],
    *,
    allowed_lateness_ms: int,
    min_open_start: int,
) -> npt.NDArray[np.int64]:
    """`min_open_start` in force when each row arrives (§4.4), for `late_mask_np`.

    `min_open_start` is the value carried in state (it may have been raised by an idle close,
    §4.5); each watermark step raises it to `oldestStart(W - allowedLateness)`.
    """
    adjusted = np.asarray(watermarks_before, dtype=np.int64) - allowed_lateness_ms
    return np.maximum.accumulate(np.maximum(geometry.oldest_start_np(adjusted), min_open_start))


def closes(end: int, watermark: int, allowed_lateness_ms: int) -> bool:
    """§4.3: a window closes when `W' = watermark - allowedLateness >= end`.

    Equivalently when the max event time is at least `end + allowedLateness + 1 ms`: with zero
    lateness an event at exactly `end` does not close `[start, end)`, one at `end + 1` does.
    """
    return watermark - allowed_lateness_ms >= end


def closes_np(
    ends: npt.NDArray[np.int64], watermark: int, allowed_lateness_ms: int
) -> npt.NDArray[np.bool_]:
    """`closes` over an array of window ends."""
    return (watermark - allowed_lateness_ms) >= np.asarray(ends, dtype=np.int64)
