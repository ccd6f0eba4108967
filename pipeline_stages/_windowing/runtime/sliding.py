"""Sluice's `$slidingWindow` (Kafka Streams KIP-450) inside the operator.

Windows `[start, start + timeDifference]` (both ends inclusive) are defined by the records of a
partition (`_windowing.sliding`): each record's left window, plus right windows that hold a
later record. Documents are decided one at a time in arrival order against the watermark `W`
before them: a record is late for every already emitted window containing it and for its own
left window when that has closed (DLQ with `missedWindowStartTimes`); it is dropped when every
window that could hold it has closed. A window closes when `W - grace >= end`.

State is bounded: records older than any window a future record could create
(`W - grace - 2 * timeDifference`) are dropped. Emitted window starts, which only a *fully
late* record's `missedWindowStartTimes` still needs, are remembered for `EMITTED_RETENTION_MS`
of event time (at least that horizon); a record later than that lists only those.

Sluice extension: with `idleTimeout`, an idle source closes windows by the fixed windows' rule
(§4.5) and later records are judged against the closed windows' end.

With `trigger` (issue 25), each window fires panes through `session_panes.SessionPanes` (the
rules of record: tests/conformance/reference_windows.SlidingWindows): a record counts for
every open window it reaches, and a window it creates starts with all the records it holds;
with `late`, a window fires ON_TIME at the first watermark change that reaches its end.
"""

from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._documents.values import MISSING
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.emit import Emitter, Segment
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.keyed import (
    LateOnce,
    Member,
    close_position,
    dead_letter,
    decode_rows,
    emit_members,
)
from pipeline_stages._windowing.runtime.pane_state import ON_TIME_DONE, upgraded_dict
from pipeline_stages._windowing.runtime.session_panes import SessionPane, SessionPanes
from pipeline_stages._windowing.sliding import SlidingGeometry

#: How long emitted window starts are remembered for late records' `missedWindowStartTimes`.
EMITTED_RETENTION_MS = 60_000


@dataclass
class SlidingPartition:
    """One partition's records (sorted by time, then arrival) and windows."""

    partition: Any
    text: str
    records: list[tuple[int, int, Member]] = field(default_factory=list)
    open_starts: set[int] = field(default_factory=set)
    emitted_starts: set[int] = field(default_factory=set)
    #: Per open window start, its pane state (a window with `trigger`).
    panes: dict[int, SessionPane] = field(default_factory=dict)

    def times(self) -> list[int]:
        """Record times, sorted."""
        return [t for t, _, _ in self.records]


class SlidingWindow:
    """One open window as `SessionPanes` fires it (a `PaneHolder`): its partition, bounds and
    the records it holds now."""

    def __init__(self, part: SlidingPartition, start: int, g: SlidingGeometry) -> None:
        self.part = part
        self.start = start
        self.end = g.end_of(start)
        self.uid = start
        lo, hi = g.records_in(part.times(), start)
        self.members = [member for _, _, member in part.records[lo:hi]]

    @property
    def pane(self) -> SessionPane | None:
        """The window's pane state."""
        return self.part.panes.get(self.start)

    @pane.setter
    def pane(self, value: SessionPane | None) -> None:
        if value is not None:
            self.part.panes[self.start] = value


@dataclass
class SlidingState:
    """Partitions by normalised key, a heap of open window starts, and the idle-close floor
    (a window end)."""

    partitions: dict[Any, SlidingPartition] = field(default_factory=dict)
    heap: list[tuple[int, Any]] = field(default_factory=list)
    floor: int | None = None


class SlidingWindows:
    """The sliding-window core; see the module docstring."""

    def __init__(
        self, spec: C.OperatorSpec, state: SlidingState, clock: Clock, out: Emitter
    ) -> None:
        if not isinstance(spec.geometry, C.SlidingGeometry):
            raise TypeError("sliding windows need a SlidingGeometry")
        self.grace = spec.allowed_lateness_ms
        self.g = SlidingGeometry(spec.geometry.time_difference_ms, self.grace)
        self.spec, self.state, self.clock, self.out = spec, state, clock, out
        self.inner = InnerRuntime(spec, out)
        self.panes = (
            None if spec.panes is None else SessionPanes(spec.panes, self.inner, out, self._bounds)
        )

    def _bounds(self, window: SlidingWindow) -> tuple[int, int, Any, str]:
        part = window.part
        partition = part.partition if self.spec.partitioned else MISSING
        return window.start, window.end, partition, part.text

    def _windows(self, keep: Any) -> list[SlidingWindow]:
        """The open windows with pane state that `keep(part, start)` accepts, in (start,
        partition) order."""
        found = sorted(
            (start, norm)
            for norm, part in self.state.partitions.items()
            for start in part.open_starts
            if start in _panes(part) and keep(part, start)
        )
        return [SlidingWindow(self.state.partitions[norm], start, self.g) for start, norm in found]

    def reach_due(self, watermark: int, seg: Segment | None = None, after: Any = ()) -> None:
        """The watermark changed to `watermark`: with `trigger.late`, the ON_TIME panes of the
        windows whose end it reaches, attributed to the position that set it."""
        panes = self.panes
        if panes is None or not panes.spec.has_late:
            return
        fallback = (self.clock.last_seq, self.clock.last_part)
        seq, part = close_position(seg, after, watermark, fallback)
        due = self._windows(
            lambda p, s: self.g.end_of(s) <= watermark and not p.panes[s].counts[ON_TIME_DONE]
        )
        for window in due:
            panes.reach_end(window, part=part, seq=seq)

    def on_clock(self, now: int) -> None:
        """Processing time reached `now`: fire the `every` panes that are due, in order."""
        panes = self.panes
        if panes is None:
            return
        seq, part = self.clock.last_seq, self.clock.last_part
        due = self._windows(lambda p, s: p.panes[s].timer_due(now))
        for window in due:
            panes.fire_timer(window, part=part, seq=seq)

    def clock_wake_ms(self) -> int | None:
        """When `on_clock` first fires a pane if no input comes (None: not before input)."""
        timers = [
            pane.timer
            for part in self.state.partitions.values()
            for start, pane in _panes(part).items()
            if start in part.open_starts and pane.timer is not None
        ]
        return min(timers, default=None)

    def effective(self, watermark: int) -> int:
        """The watermark, raised by an idle close to make closed windows stay closed."""
        floor = self.state.floor
        return watermark if floor is None else max(watermark, floor + self.grace)

    def segment(
        self, seg: Segment, before: npt.NDArray[np.int64], after: npt.NDArray[np.int64]
    ) -> None:
        """Process one segment with input, record by record."""
        seg.emit_failed_before(self.out)
        closing = after - self.grace - self.g.time_difference_ms
        rows = np.flatnonzero(np.isin(seg.flag, C.ENTERED))
        if len(rows):
            decoded = decode_rows(seg, rows, self.inner, self.clock.next_order)
            self.clock.next_order += len(rows)
            late = LateOnce(seg, self.out, self.spec)
            reached = self.effective(int(before[seg.pos[rows[0]]]))
            for i, r in enumerate(rows.tolist()):
                watermark = self.effective(int(before[seg.pos[r]]))
                if watermark > reached:  # the `late` model's ON_TIME panes, at each change
                    self.reach_due(watermark, seg, after)
                reached = watermark
                norm = decoded.norms[i]
                part = self.state.partitions.get(norm)
                if part is None:
                    part = SlidingPartition(decoded.values[i], decoded.texts[i])
                    self.state.partitions[norm] = part
                # Windows the watermark before this record passed close first, all of them
                # in one order, so emissions do not depend on the batch size.
                self.close_due(watermark, seg, closing)
                self._place(part, norm, decoded.members[i], r, watermark, late)
            if self.effective(self.clock.combined) > reached:
                self.reach_due(self.effective(self.clock.combined), seg, after)
        self.close_due(self.effective(self.clock.combined), seg, closing)
        self._prune()

    def _place(
        self,
        part: SlidingPartition,
        norm: Any,
        member: Member,
        r: int,
        watermark: int,
        late: LateOnce,
    ) -> None:
        g, t = self.g, member.t
        missed = {s for s in part.emitted_starts if g.contains(s, t)}
        if g.left_window_closed(t, watermark):
            missed.add(g.left_start(t))
        if missed:
            late(r, sorted(missed))
        if g.fully_late(t, watermark):
            return
        created = g.new_window_starts(part.times(), t) - part.open_starts - part.emitted_starts
        reached = [s for s in part.open_starts if g.contains(s, t)]
        opened = []
        for start in created:
            if not g.closes(start, watermark):
                part.open_starts.add(start)
                opened.append(start)
                heapq.heappush(self.state.heap, (start, norm))
        bisect.insort(part.records, (t, member.order, member), key=lambda rec: rec[:2])
        if self.panes is not None:
            self._panes_on_record(part, member, r, late.seg, reached, opened)

    def _panes_on_record(
        self,
        part: SlidingPartition,
        member: Member,
        r: int,
        seg: Segment,
        reached: list[int],
        opened: list[int],
    ) -> None:
        """A placed record's panes: it counts for the open windows it reaches, and the windows
        it created start with every record they hold; each fires when its count is due, in
        start order. Its inner failure goes to the DLQ once, now."""
        panes = self.panes
        if panes is None:
            return
        _panes(part)  # a partition pickled before its windows fired panes gets the field
        if member.failure is not None:
            dead_letter(self.inner, self.out, member.failure, {})
        where = {"part": int(seg.part[r]), "seq": int(seg.seq[r])}
        created = set(opened)
        for start in sorted({*reached, *created}):
            window = SlidingWindow(part, start, self.g)
            if start in created:
                panes.open_window(window, window.members, now=seg.now)
                panes.fire_if_due(window, **where)
            else:
                panes.arrive(window, member, now=seg.now, dlq=False, **where)

    def close_due(self, watermark: int, seg: Segment | None = None, closing: Any = ()) -> None:
        """Close every window with `W - grace >= end`, in (start, partition) order."""
        heap = self.state.heap
        while heap and self.g.closes(heap[0][0], watermark):
            start, norm = heapq.heappop(heap)
            part = self.state.partitions.get(norm)
            if part is not None and start in part.open_starts:
                self._emit(part, start, seg, closing)

    def _emit(self, part: SlidingPartition, start: int, seg: Segment | None, closing: Any) -> None:
        fallback = (self.clock.last_seq, self.clock.last_part)
        if self.panes is not None and start in _panes(part):
            seq, part_no = close_position(seg, closing, start, fallback)
            self.panes.close(SlidingWindow(part, start, self.g), part=part_no, seq=seq)
            del part.panes[start]
            part.open_starts.discard(start)
            part.emitted_starts.add(start)
            return
        part.open_starts.discard(start)
        part.emitted_starts.add(start)
        lo, hi = self.g.records_in(part.times(), start)
        end = self.g.end_of(start)
        emit_members(
            self.inner,
            self.out,
            [member for _, _, member in part.records[lo:hi]],
            start=start,
            end=end,
            partition=part.partition if self.spec.partitioned else MISSING,
            partition_text=part.text,
            position=close_position(seg, closing, start, fallback),
        )

    def _prune(self) -> None:
        horizon = self.effective(self.clock.combined) - self.grace - 2 * self.g.time_difference_ms
        remembered = min(horizon, self.effective(self.clock.combined) - EMITTED_RETENTION_MS)
        for norm, part in list(self.state.partitions.items()):
            keep_from = min([horizon - 2, *part.open_starts])
            cut = bisect.bisect_left(part.records, keep_from, key=lambda rec: rec[0])
            del part.records[:cut]
            part.emitted_starts = {s for s in part.emitted_starts if s > remembered - 2}
            if not part.records and not part.open_starts and not part.emitted_starts:
                del self.state.partitions[norm]

    def on_rise(self, watermark: int) -> None:
        """The watermark rose outside a document (partition idleness): the ON_TIME panes it
        reaches (`trigger.late`), then the windows it closes."""
        self.reach_due(self.effective(watermark))
        self.close_due(self.effective(watermark))

    def idle(self) -> None:
        """Sluice extension: idleTimeout closes windows as §4.5 closes fixed windows."""
        clock = self.clock
        limit = clock.idle_close_now(
            self.spec.idle_timeout_ms, self.open_ends(), self.effective(clock.combined) - self.grace
        )
        if limit is not None:
            self.state.floor = max(self.state.floor or limit, limit)
            self.close_due(self.effective(clock.combined))

    def idle_wake_ms(self) -> int | None:
        """When `idle()` first closes a window if no input comes (None: not before input)."""
        return self.clock.idle_wake_ms(
            self.spec.idle_timeout_ms,
            self.open_ends(),
            self.effective(self.clock.combined) - self.grace,
        )

    def open_ends(self) -> list[int]:
        """Ends of the open windows (the operator's wake-up arithmetic reads them)."""
        return [self.g.end_of(s) for p in self.state.partitions.values() for s in p.open_starts]

    def processing_time_tick(self, now: int) -> None:
        """Sliding windows are event-time only; nothing closes by the clock."""

    def open_starts(self) -> list[int]:
        """Starts of the open windows."""
        return sorted(s for p in self.state.partitions.values() for s in p.open_starts)


def _panes(part: SlidingPartition) -> dict[int, SessionPane]:
    """`part.panes`, added to a partition pickled before sliding windows fired panes."""
    return upgraded_dict(part, "panes")
