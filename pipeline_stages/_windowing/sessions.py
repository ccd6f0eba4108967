"""Session-window rules for `$sessionWindow` (atlas-semantics.md §3.6, `$sessionWindow`).

A session is tracked by the span `[min_ts, max_ts]` of the event times it holds; its output
window is `[min_ts, max_ts + gap)`. Two documents of one partition share a session when their
times differ by less than `gap`, so an out-of-order document can bridge, and merge, two
sessions. All times are epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class SessionSpan:
    """The event-time span of one open session: earliest and latest event time in it."""

    min_ts: int
    max_ts: int

    @classmethod
    def of(cls, t: int) -> SessionSpan:
        """The span of a session holding a single event at `t`."""
        return cls(t, t)

    def window_end(self, gap_ms: int) -> int:
        """The output window's end: `max_ts + gap` (§3.6 "end = last event ts + gap")."""
        return self.max_ts + gap_ms

    def union(self, other: SessionSpan) -> SessionSpan:
        """The span covering both sessions."""
        return SessionSpan(min(self.min_ts, other.min_ts), max(self.max_ts, other.max_ts))


def sessions_mergeable(left: SessionSpan, right: SessionSpan, gap_ms: int) -> bool:
    """True when the later-starting span begins less than `gap` after the other one ends.

    This is "timestamps differ by less than gap" lifted to spans; overlapping spans always
    merge (the distance is negative).
    """
    first, second = (left, right) if left.min_ts <= right.min_ts else (right, left)
    return second.min_ts - first.max_ts < gap_ms


def merge_session_spans(
    open_spans: Iterable[SessionSpan], t: int, gap_ms: int
) -> tuple[SessionSpan, list[SessionSpan]]:
    """Place an event at `t` among a partition's open sessions.

    Returns:
        `(merged, absorbed)`: the span of the session the event ends up in, and the open spans
        that merged into it (empty when the event starts a new session). More than one absorbed
        span means the event bridged sessions that were separate until now.
    """
    merged = SessionSpan.of(t)
    absorbed = []
    for span in sorted(open_spans):
        if sessions_mergeable(span, merged, gap_ms):
            merged = merged.union(span)
            absorbed.append(span)
    return merged, absorbed


def session_closes(span: SessionSpan, adjusted_watermark: int, gap_ms: int) -> bool:
    """A session closes when `W' = W - allowedLateness >= max_ts + gap` (§3.6, same rule as §4.3)."""
    return adjusted_watermark >= span.window_end(gap_ms)


def session_is_late(t: int, adjusted_watermark: int | None, *, has_open_session: bool) -> bool:
    """§3.6: a document older than the watermark with no open session for it goes to the DLQ.

    "Older than the watermark" is read against `W' = W - allowedLateness` (so that
    allowedLateness also protects the first event of a session) and strictly (`t < W'`).
    """
    if has_open_session or adjusted_watermark is None:
        return False
    return t < adjusted_watermark
