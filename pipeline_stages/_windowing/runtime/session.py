"""`$sessionWindow` inside the operator (atlas-semantics.md §3.6).

Per `partitionBy` value, open sessions are spans `[min_ts, max_ts]`; two documents share a
session when their times differ by less than `gap`, so an out-of-order document can bridge and
merge two sessions (`_windowing.sessions`). Documents are decided one at a time in arrival
order: a document older than `W' = W - allowedLateness` with no open session to join is late
(DLQ, no `missedWindowStartTimes`). A session closes when `W' >= max_ts + gap`; its window is
`[min_ts, max_ts + gap)` with the partition value.

Sluice extension: Atlas documents no `idleTimeout` for sessions, but the shared window spec
accepts it; when set, an idle source closes sessions by the same rule as fixed windows (§4.5),
and later documents older than the closed sessions' end are late.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.clock import Clock
from pipeline_stages._windowing.runtime.emit import Emitter, Segment
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.keyed import (
    LateOnce,
    Member,
    close_position,
    decode_rows,
    emit_members,
)
from pipeline_stages._windowing.runtime.session_panes import SessionPane, SessionPanes
from pipeline_stages._windowing.sessions import SessionSpan, merge_session_spans


@dataclass
class Session:
    """One open session: its span, partition and members."""

    span: SessionSpan
    partition: Any
    partition_text: str
    uid: int
    members: list[Member] = field(default_factory=list)
    #: The window's pane state when it fires panes (`runtime.session_panes`).
    pane: SessionPane | None = None


@dataclass
class SessionState:
    """Open sessions by normalised partition key, a heap of their ends (stale entries are
    skipped), and the idle-close floor."""

    sessions: dict[Any, list[Session]] = field(default_factory=dict)
    heap: list[tuple[int, int, Any]] = field(default_factory=list)
    next_uid: int = 0
    floor: int | None = None


class SessionWindows:
    """The session-window core; see the module docstring."""

    def __init__(
        self, spec: C.OperatorSpec, state: SessionState, clock: Clock, out: Emitter
    ) -> None:
        if not isinstance(spec.geometry, C.SessionGeometry):
            raise TypeError("session windows need a SessionGeometry")
        self.gap = spec.geometry.gap_ms
        self.lateness = spec.allowed_lateness_ms
        self.spec, self.state, self.clock, self.out = spec, state, clock, out
        self.inner = InnerRuntime(spec, out)
        self.panes = (
            None if spec.panes is None else SessionPanes(spec.panes, self.inner, out, self._bounds)
        )

    def _bounds(self, session: Session) -> tuple[int, int, Any, str]:
        """The session's window `(start, end, partition, partition text)` (its panes')."""
        return session.span.min_ts, self.end(session), session.partition, session.partition_text

    def end(self, session: Session) -> int:
        """The session window's end: last event + gap."""
        return session.span.max_ts + self.gap

    def segment(
        self, seg: Segment, before: npt.NDArray[np.int64], after: npt.NDArray[np.int64]
    ) -> None:
        """Process one segment with input, document by document."""
        seg.emit_failed_before(self.out)
        adjusted_after = after - self.lateness
        rows = np.flatnonzero(np.isin(seg.flag, C.ENTERED))
        # The watermark the `late` model's ON_TIME panes were last looked for at: they fire
        # at each change of the watermark, as the reference model's do.
        reached = int(before[0]) if len(before) else int(self.clock.combined)
        if len(rows):
            decoded = decode_rows(seg, rows, self.inner, self.clock.next_order)
            self.clock.next_order += len(rows)
            late = LateOnce(seg, self.out, self.spec)
            for i, r in enumerate(rows.tolist()):
                watermark = int(before[seg.pos[r]])
                if watermark > reached:
                    self.reach_due(watermark, seg, after)
                reached = watermark
                adjusted = watermark - self.lateness
                # Sessions the watermark before this document passed close first, all of
                # them in one order, so emissions do not depend on the batch size.
                self.close_due(adjusted, seg, adjusted_after)
                self._place(decoded, i, r, adjusted, late)
        if self.clock.combined > reached:
            self.reach_due(int(self.clock.combined), seg, after)
        self.close_due(int(self.clock.combined) - self.lateness, seg, adjusted_after)

    def _place(self, decoded: Any, i: int, r: int, adjusted: int, late: LateOnce) -> None:
        member: Member = decoded.members[i]
        norm = decoded.norms[i]
        sessions = self.state.sessions.setdefault(norm, [])
        merged, absorbed = merge_session_spans([s.span for s in sessions], member.t, self.gap)
        floor = adjusted if self.state.floor is None else max(adjusted, self.state.floor)
        if not absorbed and member.t < floor:
            late(r, None)
            return
        olds = [s for s in sessions if s.span in absorbed]
        if self.panes is not None and len(olds) == 1 and olds[0].span == merged:
            session = olds[0]  # its bounds stay: the same window (`runtime.session_panes`)
        else:
            session = self._open(olds, merged, decoded, i, norm)
        session.members.append(member)
        if self.panes is not None:
            seg = late.seg
            self.panes.arrive(
                session, member, part=int(seg.part[r]), seq=int(seg.seq[r]), now=seg.now
            )

    def _open(
        self, olds: list[Session], span: SessionSpan, decoded: Any, i: int, norm: Any
    ) -> Session:
        """A new session in place of `olds` (merged into it)."""
        state = self.state
        session = Session(span, decoded.values[i], decoded.texts[i], uid=state.next_uid)
        state.next_uid += 1
        sessions = state.sessions[norm]
        for old in olds:
            session.members.extend(old.members)
            sessions.remove(old)
        if self.panes is not None:
            self.panes.new_window(session, olds)
        sessions.append(session)
        heapq.heappush(state.heap, (self.end(session), session.uid, norm))
        return session

    def _in_order(self, keep: Callable[[Session], bool]) -> list[Session]:
        """The open sessions `keep` accepts, in (start, end, partition) order."""
        found = [
            (s.span.min_ts, s.span.max_ts, norm, s.uid, s)
            for norm, sessions in self.state.sessions.items()
            for s in sessions
            if keep(s)
        ]
        return [item[4] for item in sorted(found, key=lambda item: item[:4])]

    def reach_due(self, watermark: int, seg: Segment | None = None, after: Any = ()) -> None:
        """The watermark changed to `watermark`: with `trigger.late`, the ON_TIME panes of the
        sessions whose end it reaches, in order, attributed to the source position that set
        it (the first whose watermark `after` it reached; without `seg`, the latest one)."""
        panes = self.panes
        if panes is None or not panes.spec.has_late:
            return
        fallback = (self.clock.last_seq, self.clock.last_part)
        seq, part = close_position(seg, after, watermark, fallback)
        due = self._in_order(lambda s: self.end(s) <= watermark and not panes.reached(s))
        for session in due:
            panes.reach_end(session, part=part, seq=seq)

    def on_clock(self, now: int) -> None:
        """Processing time reached `now`: fire the `every` panes that are due, in order."""
        panes = self.panes
        if panes is None:
            return
        seq, part = self.clock.last_seq, self.clock.last_part
        for session in self._in_order(lambda s: panes.timer_due(s, now)):
            panes.fire_timer(session, part=part, seq=seq)

    def clock_wake_ms(self) -> int | None:
        """When `on_clock` first fires a pane if no input comes (None: not before input)."""
        if self.panes is None:
            return None
        timers = [
            s.pane.timer
            for sessions in self.state.sessions.values()
            for s in sessions
            if s.pane is not None and s.pane.timer is not None
        ]
        return min(timers, default=None)

    def close_due(self, limit: int, seg: Segment | None = None, adjusted_after: Any = ()) -> None:
        """Close every session ending at or before `limit`, in (start, end, partition) order."""
        state, due = self.state, []
        while state.heap and state.heap[0][0] <= limit:
            _, uid, norm = heapq.heappop(state.heap)
            found = [s for s in state.sessions.get(norm, ()) if s.uid == uid]
            if found:  # else a stale entry: the session merged into a newer one
                due.append((found[0].span.min_ts, found[0].span.max_ts, norm, uid, found[0]))
        for _, _, norm, _, session in sorted(due, key=lambda item: item[:4]):
            sessions = state.sessions[norm]
            sessions.remove(session)
            if not sessions:
                del state.sessions[norm]
            self._emit(session, seg, adjusted_after)

    def _emit(self, session: Session, seg: Segment | None, adjusted_after: Any) -> None:
        end = self.end(session)
        fallback = (self.clock.last_seq, self.clock.last_part)
        seq, part = close_position(seg, adjusted_after, end, fallback)
        if self.panes is not None:
            self.panes.close(session, part=part, seq=seq)
            return
        emit_members(
            self.inner,
            self.out,
            session.members,
            start=session.span.min_ts,
            end=end,
            partition=session.partition,
            partition_text=session.partition_text,
            position=(seq, part),
        )

    def on_rise(self, watermark: int) -> None:
        """The watermark rose outside a document (partition idleness): the ON_TIME panes it
        reaches (`trigger.late`), then the sessions it closes."""
        self.reach_due(watermark)
        self.close_due(watermark - self.lateness)

    def idle(self) -> None:
        """Sluice extension: idleTimeout closes sessions as §4.5 closes fixed windows."""
        clock = self.clock
        limit = clock.idle_close_now(
            self.spec.idle_timeout_ms, self.open_ends(), clock.combined - self.lateness
        )
        if limit is not None:
            self.close_due(limit)
            self.state.floor = max(self.state.floor or limit, limit)

    def idle_wake_ms(self) -> int | None:
        """When `idle()` first closes a session if no input comes (None: not before input)."""
        return self.clock.idle_wake_ms(
            self.spec.idle_timeout_ms, self.open_ends(), self.clock.combined - self.lateness
        )

    def open_ends(self) -> list[int]:
        """Ends of the open windows (the operator's wake-up arithmetic reads them)."""
        return [self.end(s) for sessions in self.state.sessions.values() for s in sessions]

    def processing_time_tick(self, now: int) -> None:
        """Processing-time sessions close by the clock: the watermark is `now - 1`."""
        if now - 1 > self.clock.combined:
            self.clock.combined = now - 1
            self.clock.advanced = True
        self.close_due(self.clock.combined)

    def open_starts(self) -> list[int]:
        """Starts of the open sessions."""
        return sorted(s.span.min_ts for sessions in self.state.sessions.values() for s in sessions)
