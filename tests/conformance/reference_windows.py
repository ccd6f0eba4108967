"""The reference window operators: fixed (tumbling/hopping), session and sliding.

Deliberately simple: documents are decided one at a time in arrival order, buffered per
window, and the inner pipeline's blocking part runs when a window closes. The arithmetic
comes from `pipeline_stages._windowing`, which is what the Spark operator uses too.

Fixed windows evaluate the per-document part of the inner pipeline (stateless stages before
the first blocking stage, `$group` key and arguments) when a document enters a window, so
per-document errors reach the DLQ at arrival, as Atlas's operators do. Session and sliding
windows evaluate it when the window closes, because their bounds (visible through
`{$meta: "stream.window..."}`) are only final then; their per-document errors reach the DLQ
at close.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline_stages._documents.values import MqlError, sort_key, to_datetime_ms
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.sessions import SessionSpan, merge_session_spans, session_is_late
from pipeline_stages._windowing.sliding import SlidingGeometry
from pipeline_stages._windowing.watermark import idle_close_end
from tests.conformance.mini_mql import Scope, evaluate
from tests.conformance.reference_inner import InnerPipeline, Outbox, Prepared
from tests.conformance.reference_panes import PaneRules, PaneWindow


def window_meta(start: int, end: int, **extra: Any) -> dict[str, Any]:
    """`_stream_meta.window` / `{$meta: "stream.window"}` for a window (§5)."""
    return {"start": to_datetime_ms(start), "end": to_datetime_ms(end), **extra}


class FixedWindows:
    """`$tumblingWindow` / `$hoppingWindow` (§4.1-§4.5)."""

    def __init__(
        self,
        geometry: WindowGeometry,
        *,
        lateness_ms: int,
        idle_timeout_ms: int | None,
        inner: InnerPipeline,
        outbox: Outbox,
        rules: PaneRules | None = None,
    ) -> None:
        self.geometry = geometry
        self.lateness_ms = lateness_ms
        self.idle_timeout_ms = idle_timeout_ms
        self.inner = inner
        self.outbox = outbox
        self.rules = rules
        self.windows: dict[int, PaneWindow] = {}
        self.min_open_start = 0
        self.max_adjusted: int | None = None

    def on_document(self, doc: Mapping[str, Any], t: int, order: int) -> None:
        """§4.4: DLQ if some window containing `t` has closed, add to the open ones."""
        missed = self.geometry.missed_starts(t, self.min_open_start)
        if missed:
            self.outbox.late(doc, self.inner.first_operator, missed)
        for start in self.geometry.open_starts(t, self.min_open_start):
            meta = window_meta(start, self.geometry.end_of(start))
            window = self.windows.setdefault(start, PaneWindow(self.rules))
            window.add(self.inner.admit(doc, meta, order), self.outbox.now_ms)
            if window.count_due():
                self.outbox.emitted.extend(window.fire(window.timing, self.inner, meta))

    def on_clock(self, now_ms: int) -> None:
        """Processing time reached `now_ms`: fire the panes whose timer is due."""
        for start in sorted(self.windows):
            window = self.windows[start]
            if window.timer_due(now_ms):
                meta = window_meta(start, self.geometry.end_of(start))
                self.outbox.emitted.extend(window.fire(window.timing, self.inner, meta))

    def on_watermark(self, watermark: int) -> None:
        """§4.3/§4.4: close windows with `end <= W'`, then raise `min_open_start` (with a
        `late` trigger, windows with `end <= W` fire their ON_TIME pane first)."""
        adjusted = watermark - self.lateness_ms
        if self.max_adjusted is None or adjusted > self.max_adjusted:
            self.max_adjusted = adjusted
        for start in sorted(self.windows):
            end = self.geometry.end_of(start)
            if end > watermark:
                break
            meta = window_meta(start, end)
            self.outbox.emitted.extend(self.windows[start].reach_end(self.inner, meta))
        self._close_through(adjusted)
        self.min_open_start = max(self.min_open_start, self.geometry.min_open_start(adjusted))

    def on_idle(self, idle_ms: int) -> None:
        """§4.5: after `idleTimeout` of source idleness, close the windows that are due."""
        if self.idle_timeout_ms is None or self.max_adjusted is None:
            return
        ends = [self.geometry.end_of(s) for s in self.windows]
        end = idle_close_end(
            ends,
            adjusted_watermark=self.max_adjusted,
            idle_duration_ms=idle_ms,
            idle_timeout_ms=self.idle_timeout_ms,
        )
        if end is not None:
            self._close_through(end)
            self.min_open_start = max(self.min_open_start, self.geometry.oldest_start(end))

    def _close_through(self, limit: int) -> None:
        for start in sorted(self.windows):
            end = self.geometry.end_of(start)
            if end > limit:
                break
            window = self.windows.pop(start)
            self.outbox.emitted.extend(window.close(self.inner, window_meta(start, end)))


@dataclass
class _Session:
    span: SessionSpan
    partition: Any
    docs: list[tuple[int, Mapping[str, Any]]] = field(default_factory=list)
    #: With a trigger: the session's documents (admitted at arrival) and pane state.
    panes: PaneWindow | None = None


class _Partitioned:
    """Evaluates `partitionBy`; a failure sends the document to the DLQ."""

    inner: InnerPipeline
    outbox: Outbox
    partition_by: Any

    def _partition(self, doc: Mapping[str, Any]) -> tuple[bool, Any]:
        if self.partition_by is None:
            return True, None
        try:
            return True, evaluate(self.partition_by, Scope(doc))
        except MqlError as exc:
            op = self.inner.first_operator
            self.outbox.dead_letter(
                doc, op, f"Failed to process input document in {op} with error: {exc}"
            )
            return False, None


class SessionWindows(_Partitioned):
    """`$sessionWindow` (§3.6): per-partition sessions that merge, close at `W' >= max + gap`."""

    def __init__(
        self,
        *,
        gap_ms: int,
        lateness_ms: int,
        partition_by: Any,
        inner: InnerPipeline,
        outbox: Outbox,
        rules: PaneRules | None = None,
    ) -> None:
        self.gap_ms = gap_ms
        self.lateness_ms = lateness_ms
        self.partition_by = partition_by
        self.inner = inner
        self.outbox = outbox
        self.rules = rules
        self.sessions: dict[Any, list[_Session]] = {}
        self.max_adjusted: int | None = None

    def on_document(self, doc: Mapping[str, Any], t: int, order: int) -> None:
        ok, partition = self._partition(doc)
        if not ok:
            return
        key = sort_key(partition)
        open_sessions = self.sessions.setdefault(key, [])
        merged, absorbed = merge_session_spans([s.span for s in open_sessions], t, self.gap_ms)
        if session_is_late(t, self.max_adjusted, has_open_session=bool(absorbed)):
            self.outbox.late(doc, self.inner.first_operator, None)
            return
        if self.rules is not None:
            self._add_with_panes(open_sessions, merged, absorbed, partition, doc, order)
            return
        session = _Session(merged, partition)
        for old in [s for s in open_sessions if s.span in absorbed]:
            session.docs.extend(old.docs)
            open_sessions.remove(old)
        session.docs.append((order, doc))
        open_sessions.append(session)

    def _add_with_panes(
        self,
        open_sessions: list[_Session],
        merged: SessionSpan,
        absorbed: Any,
        partition: Any,
        doc: Mapping[str, Any],
        order: int,
    ) -> None:
        """A session whose bounds stay is the same window; any other change makes a new
        window that absorbs the old ones (and retracts their results: `reference_panes`)."""
        olds = [s for s in open_sessions if s.span in absorbed]
        if len(olds) == 1 and olds[0].span == merged:
            session = olds[0]
        else:
            fresh = PaneWindow(self.rules)
            fresh.absorb([old.panes for old in olds if old.panes is not None])
            for old in olds:
                open_sessions.remove(old)
            session = _Session(merged, partition, panes=fresh)
            open_sessions.append(session)
        panes = session.panes
        if panes is None:
            raise ValueError("a session of a window with a trigger has pane state")
        panes.add(self.inner.admit(doc, {}, order), self.outbox.now_ms)
        if panes.count_due():
            self.outbox.emitted.extend(panes.fire(panes.timing, self.inner, self._meta(session)))

    def _meta(self, session: _Session) -> dict[str, Any]:
        span = session.span
        return window_meta(span.min_ts, span.window_end(self.gap_ms), partition=session.partition)

    def on_clock(self, now_ms: int) -> None:
        """Processing time reached `now_ms`: fire the panes whose timer is due."""
        for session in self._in_order(lambda s: s.panes is not None and s.panes.timer_due(now_ms)):
            panes = session.panes
            assert panes is not None
            self.outbox.emitted.extend(panes.fire(panes.timing, self.inner, self._meta(session)))

    def _in_order(self, keep: Any) -> list[_Session]:
        found = [
            (s.span.min_ts, s.span.max_ts, key, s)
            for key, sessions in self.sessions.items()
            for s in sessions
            if keep(s)
        ]
        return [item[3] for item in sorted(found, key=lambda item: item[:3])]

    def on_watermark(self, watermark: int) -> None:
        adjusted = watermark - self.lateness_ms
        self.max_adjusted = (
            adjusted if self.max_adjusted is None else max(self.max_adjusted, adjusted)
        )
        due = [
            (s.span.min_ts, s.span.max_ts, key, s)
            for key, sessions in self.sessions.items()
            for s in sessions
            if adjusted >= s.span.window_end(self.gap_ms)
        ]
        if self.rules is not None:
            for session in self._in_order(lambda s: watermark >= s.span.window_end(self.gap_ms)):
                assert session.panes is not None
                self.outbox.emitted.extend(session.panes.reach_end(self.inner, self._meta(session)))
        for _, _, key, session in sorted(due, key=lambda item: item[:3]):
            self.sessions[key].remove(session)
            meta = self._meta(session)
            if session.panes is not None:
                self.outbox.emitted.extend(session.panes.close(self.inner, meta))
                continue
            docs = sorted(session.docs, key=lambda pair: pair[0])
            self.outbox.emitted.extend(self.inner.run(docs, meta))

    def on_idle(self, idle_ms: int) -> None:
        """`$sessionWindow` has no idleTimeout."""


@dataclass
class _SlidingPartition:
    partition: Any
    records: list[tuple[int, int, Mapping[str, Any]]] = field(default_factory=list)
    open_starts: set[int] = field(default_factory=set)
    emitted_starts: set[int] = field(default_factory=set)
    #: With a trigger: each record's admitted items (by arrival order) and each open
    #: window's pane state.
    prepared: dict[int, list[Prepared]] = field(default_factory=dict)
    panes: dict[int, PaneWindow] = field(default_factory=dict)

    def times(self) -> list[int]:
        return [t for t, _, _ in self.records]


class SlidingWindows(_Partitioned):
    """Sluice's `$slidingWindow` (KIP-450): record-defined windows, inclusive at both ends.

    With a trigger (issue 25), each window fires panes as a fixed window does, with one rule
    of its own: a window a record creates starts with every record it holds (all of them
    reach it then), so `early: {count: N}` fires it at once when it holds N records, as
    Kafka Streams' emit-on-update emits each window a record creates or changes."""

    def __init__(
        self,
        geometry: SlidingGeometry,
        *,
        partition_by: Any,
        inner: InnerPipeline,
        outbox: Outbox,
        rules: PaneRules | None = None,
    ) -> None:
        self.geometry = geometry
        self.partition_by = partition_by
        self.inner = inner
        self.outbox = outbox
        self.rules = rules
        self.partitions: dict[Any, _SlidingPartition] = {}
        self.watermark: int | None = None

    def on_document(self, doc: Mapping[str, Any], t: int, order: int) -> None:
        ok, partition = self._partition(doc)
        if not ok:
            return
        part = self.partitions.setdefault(sort_key(partition), _SlidingPartition(partition))
        g, wm = self.geometry, self.watermark
        if wm is not None:
            missed = {s for s in part.emitted_starts if g.contains(s, t)}
            if g.left_window_closed(t, wm):
                missed.add(g.left_start(t))
            if missed:
                self.outbox.late(doc, self.inner.first_operator, sorted(missed))
            if g.fully_late(t, wm):
                return
        created = g.new_window_starts(part.times(), t) - part.open_starts - part.emitted_starts
        reached = {s for s in part.open_starts if g.contains(s, t)}
        opened = {s for s in created if wm is None or not g.closes(s, wm)}
        part.open_starts |= opened
        part.records.append((t, order, doc))
        part.records.sort(key=lambda r: (r[0], r[1]))
        if self.rules is not None:
            self._panes_on_record(part, t, order, doc, reached, opened)

    def _panes_on_record(
        self,
        part: _SlidingPartition,
        t: int,
        order: int,
        doc: Mapping[str, Any],
        reached: set[int],
        opened: set[int],
    ) -> None:
        part.prepared[order] = self.inner.admit(doc, {}, order)  # DLQs a failure once, now
        now = self.outbox.now_ms
        for start in sorted(reached | opened):
            if start in opened:
                window = part.panes[start] = PaneWindow(self.rules)
                lo, hi = self.geometry.records_in(part.times(), start)
                for _, member, _ in sorted(part.records[lo:hi], key=lambda r: r[1]):
                    window.add(part.prepared[member], now)
            else:
                window = part.panes[start]
                window.add(part.prepared[order], now)
            if window.count_due():
                self.outbox.emitted.extend(
                    window.fire(window.timing, self.inner, self._meta(part, start))
                )

    def _meta(self, part: _SlidingPartition, start: int) -> dict[str, Any]:
        extra = {} if self.partition_by is None else {"partition": part.partition}
        return window_meta(start, self.geometry.end_of(start), **extra)

    def _open_windows(self, keep: Any) -> list[tuple[int, Any]]:
        """`(start, partition key)` of the open windows `keep(part, start)` accepts, sorted."""
        return sorted(
            (start, key)
            for key, part in self.partitions.items()
            for start in part.open_starts
            if keep(part, start)
        )

    def on_watermark(self, watermark: int) -> None:
        self.watermark = watermark if self.watermark is None else max(self.watermark, watermark)
        g = self.geometry
        if self.rules is not None:
            reach = self._open_windows(lambda part, start: g.end_of(start) <= self.watermark)
            for start, key in reach:
                part = self.partitions[key]
                meta = self._meta(part, start)
                self.outbox.emitted.extend(part.panes[start].reach_end(self.inner, meta))
        due = self._open_windows(lambda part, start: g.closes(start, self.watermark))
        for start, key in due:
            part = self.partitions[key]
            part.open_starts.discard(start)
            part.emitted_starts.add(start)
            meta = self._meta(part, start)
            if self.rules is not None:
                self.outbox.emitted.extend(part.panes.pop(start).close(self.inner, meta))
                continue
            lo, hi = g.records_in(part.times(), start)
            docs = sorted(((o, d) for _, o, d in part.records[lo:hi]), key=lambda pair: pair[0])
            self.outbox.emitted.extend(self.inner.run(docs, meta))

    def on_clock(self, now_ms: int) -> None:
        """Processing time reached `now_ms`: fire the panes whose timer is due."""
        if self.rules is None:
            return
        due = self._open_windows(lambda part, start: part.panes[start].timer_due(now_ms))
        for start, key in due:
            part = self.partitions[key]
            window = part.panes[start]
            meta = self._meta(part, start)
            self.outbox.emitted.extend(window.fire(window.timing, self.inner, meta))

    def on_idle(self, idle_ms: int) -> None:
        """`$slidingWindow` has no idleTimeout."""


class GlobalWindow:
    """Sluice's `$globalWindow`: one window over all time; it fires EARLY panes only."""

    def __init__(self, rules: PaneRules, *, inner: InnerPipeline, outbox: Outbox) -> None:
        self.inner = inner
        self.outbox = outbox
        self.window = PaneWindow(rules)

    def on_document(self, doc: Mapping[str, Any], t: int, order: int) -> None:
        """Every document enters the window (nothing is late)."""
        del t
        self.window.add(self.inner.admit(doc, {}, order), self.outbox.now_ms)
        if self.window.count_due():
            self.outbox.emitted.extend(self.window.fire("EARLY", self.inner, {}))

    def on_clock(self, now_ms: int) -> None:
        """Processing time reached `now_ms`: fire the pane if its timer is due."""
        if self.window.timer_due(now_ms):
            self.outbox.emitted.extend(self.window.fire("EARLY", self.inner, {}))

    def on_watermark(self, watermark: int) -> None:
        """The global window never closes."""

    def on_idle(self, idle_ms: int) -> None:
        """The global window never closes."""
