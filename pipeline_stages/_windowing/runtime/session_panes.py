"""Panes of session and sliding windows in the operator (issue 25; the rules of record are
the reference model's, tests/conformance/reference_panes.py and reference_windows).

(The module and class names predate sliding windows' panes and stay: window states in
checkpoints pickle `SessionPane` by this path.)

Sliding windows (`runtime.sliding`) use the same pane state and firing through a handle per
window (`SlidingWindow`: its start, end, partition and the records it holds). A window a
record creates starts with every record it holds counted (`open_window`), so `early: {count:
N}` fires it at once when it holds N; a record that reaches an existing window counts as for
a session (`arrive`, its failure DLQ'd once by the sliding core). Sliding windows never merge.

A session fires its panes through the fixed windows' `PaneFirer` (contents, `onlyUpdatedPanes`,
retractions, "a pane that emits nothing is not fired"); this module keeps a session's pane
state and decides when its panes fire:

* **Which window**: a document that leaves a session's bounds as they were joins the same
  window. Any other placement (a new session, a session extended, sessions bridged) makes a
  new window that absorbs the old ones' pane state: their documents, those since their
  previous pane, their counts since their previous pane (summed) and, with
  `accumulatingAndRetracting`, their emitted results, which are retracted (stamped with the
  new window's next pane, in the old windows' bounds) before its next pane. The new window's
  pane index starts at 0: it is a new window.
* **EARLY** (`early: {count: N}`): right after the N-th document that reached the window
  since its previous pane (documents the inner prefix drops or fails count too; a failed one
  goes to the DLQ when it arrives, as in the reference model, not at close). `early: {every:
  d}` (processing time): the first document that reaches the window since its previous pane
  sets the window's timer to `now + d`; the pane fires when processing time reaches it
  (`SessionWindows.on_clock`). Any fire attempt, fired or not, clears the timer. A new window
  takes the earliest timer of the windows it absorbs;
* **ON_TIME**: without `late`, when the session closes by Atlas's rule; it is its last pane.
  With `late` (the Beam model), at the first watermark change that reaches the session's end
  (`W >= end`; `SessionWindows` calls `reach_end`); the session stays open until Atlas's rule
  closes it, and the documents that reach it in between count for `late` (`count` or
  `every`), which fires LATE panes as `early` fires EARLY ones; at close, a last LATE pane if
  documents reached it since its previous pane. A new window (a session extended or bridged
  after its ON_TIME pane) starts again with EARLY panes, as the reference model's does.

A session's content is folded as its documents arrive, as a fixed window's is, and moves to
the new window when a document extends the session; when sessions merge, the new window folds
its content from the members at its next pane (the members are kept for that, or with
`discarding` those since the previous pane).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.blocking import fold
from pipeline_stages._windowing.runtime.emit import Emitter
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.keyed import Member, dead_letter, member_content
from pipeline_stages._windowing.runtime.pane_firing import (
    EARLY,
    LATE,
    ON_TIME,
    Emitted,
    PaneFirer,
    retraction,
)
from pipeline_stages._windowing.runtime.pane_state import INDEX, ON_TIME_DONE, SINCE, PaneCounts

if TYPE_CHECKING:
    from pipeline_stages._windowing.runtime.session import Session


class PaneHolder(Protocol):
    """A window whose panes `SessionPanes` fires: a session, or a sliding window's handle."""

    pane: SessionPane | None
    members: list[Member]
    uid: int


@dataclass
class SessionPane:
    """One session window's pane state (pickled with its session)."""

    #: `[index of the next pane, documents since the previous pane, 0]` (`runtime.pane_state`).
    counts: PaneCounts = field(default_factory=lambda: [0, 0, 0])
    #: The members that arrived since the previous pane.
    since: list[Member] = field(default_factory=list)
    #: Per output group, its last emission (`accumulatingAndRetracting`).
    emitted: dict[Any, list[Emitted]] = field(default_factory=dict)
    #: Results of merged-away windows to retract before the next pane: `(start, end, result)`.
    pending: list[tuple[int, int, Emitted]] = field(default_factory=list)
    #: The folded content of the pane's members (all, or since the previous pane when
    #: discarding); None: to fold from them at the next pane (after a merge of sessions).
    content: Any = None
    #: The processing time the window's `every` pane fires at (None: no timer armed). A class
    #: default, so states pickled before `every` fired on sessions read None.
    timer: int | None = None

    def timer_due(self, now: int) -> bool:
        """Whether the window's `every` pane fires at processing time `now`."""
        return self.timer is not None and self.timer <= now


#: A window's `(start, end, partition value, partition text)`.
Bounds = tuple[int, int, Any, str]


class _SessionFirer(PaneFirer):
    """`PaneFirer` over session (or sliding) windows, named by their uid while they fire."""

    def __init__(
        self, spec: C.PaneSpec, inner: InnerRuntime, out: Emitter, bounds: Callable[[Any], Bounds]
    ) -> None:
        super().__init__(spec, inner, out, {}, 0, {}, {})
        self.window_bounds = bounds
        self.firing: dict[int, Any] = {}

    def bounds(self, start: int) -> tuple[int, int, dict[str, Any]]:
        """The window, its partition and result keys (`keyed.emit_members`'s)."""
        lo, hi, partition, text = self.window_bounds(self.firing[start])
        return lo, hi, {"partition": partition, "key_prefix": f"{text}|"}


class SessionPanes:
    """Fires the panes of one operator's session or sliding windows (see the module
    docstring); `bounds` gives a window's `(start, end, partition, partition text)`."""

    def __init__(
        self, spec: C.PaneSpec, inner: InnerRuntime, out: Emitter, bounds: Callable[[Any], Bounds]
    ) -> None:
        self.spec = spec
        self.inner = inner
        self.out = out
        self.bounds = bounds
        self.firer = _SessionFirer(spec, inner, out, bounds)
        self.discarding = spec.mode == "discarding"
        self.retracting = spec.mode == "accumulatingAndRetracting"

    def new_window(self, session: Session, olds: list[Session]) -> None:
        """`session` is a new window that absorbs the windows of `olds` (merged away)."""
        pane = SessionPane()
        if len(olds) == 1 and olds[0].pane is not None:
            pane.content = olds[0].pane.content  # the same documents: no fold from scratch
        for old in olds:
            other = old.pane
            if other is None:
                continue
            pane.since.extend(other.since)
            pane.counts[SINCE] += other.counts[SINCE]
            pane.pending.extend(other.pending)
            if other.timer is not None:
                pane.timer = other.timer if pane.timer is None else min(pane.timer, other.timer)
            if self.retracting:
                start, end, _, _ = self.bounds(old)
                pane.pending.extend(
                    (start, end, result) for group in other.emitted.values() for result in group
                )
        session.pane = pane

    def open_window(self, window: PaneHolder, members: list[Member], *, now: int) -> None:
        """A record created sliding window `window`, which holds `members`: all of them
        reached it now (the caller then fires it if its count is due: `fire_if_due`)."""
        pane = SessionPane(since=list(members))
        pane.counts[SINCE] = len(members)
        if self.spec.early_every_ms is not None and members:
            pane.timer = now + self.spec.early_every_ms
        window.pane = pane

    def arrive(
        self,
        session: PaneHolder,
        member: Member,
        *,
        part: int,
        seq: int,
        now: int,
        dlq: bool = True,
    ) -> None:
        """A document reached the window (`member`, already among its members) at processing
        time `now`: count it, arm the phase's `every` timer, DLQ its inner failure (unless
        not `dlq`: a sliding record's, once per record), and fire the phase's pane when its
        count is due."""
        pane = self._pane(session)
        pane.since.append(member)
        pane.counts[SINCE] += 1
        late = pane.counts[ON_TIME_DONE]
        every = self.spec.late_every_ms if late else self.spec.early_every_ms
        if every is not None and pane.timer is None:
            pane.timer = now + every
        if pane.content is not None and member.item is not None:
            if self.inner.group is not None:
                fold(self.inner.group, pane.content, [(member.order, *member.item)])
            else:
                pane.content.append((member.order, *member.item))
        if dlq and member.failure is not None:  # at arrival: the bounds are not final
            dead_letter(self.inner, self.out, member.failure, {})
        self.fire_if_due(session, part=part, seq=seq)

    def fire_if_due(self, window: PaneHolder, *, part: int, seq: int) -> None:
        """Fire the window's pane of its phase when the phase's count is due."""
        counts = self._pane(window).counts
        late = counts[ON_TIME_DONE]
        count = self.spec.late_count if late else self.spec.early_count
        if count is not None and counts[SINCE] >= count:
            self.fire(window, LATE if late else EARLY, part=part, seq=seq)

    def timer_due(self, session: PaneHolder, now: int) -> bool:
        """Whether the window's `every` pane fires at processing time `now`."""
        return self._pane(session).timer_due(now)

    def fire_timer(self, session: PaneHolder, *, part: int, seq: int) -> None:
        """The window's `every` timer is due: the pane of its phase."""
        late = self._pane(session).counts[ON_TIME_DONE]
        self.fire(session, LATE if late else EARLY, part=part, seq=seq)

    def reached(self, session: PaneHolder) -> bool:
        """Whether the window's ON_TIME pane of the `late` model has fired."""
        return bool(self._pane(session).counts[ON_TIME_DONE])

    def reach_end(self, session: PaneHolder, *, part: int, seq: int) -> None:
        """The watermark reached the session's end (`trigger.late`): its ON_TIME pane; the
        LATE phase starts whether the pane fired or not (with nothing since it)."""
        pane = self._pane(session)
        if not self.spec.has_late or pane.counts[ON_TIME_DONE]:
            return
        if not self.fire(session, ON_TIME, part=part, seq=seq):
            pane.since = []
            if self.discarding:
                session.members, pane.content = [], self.inner.new_content()
        pane.counts[ON_TIME_DONE] = 1
        pane.counts[SINCE] = 0
        pane.timer = None

    def close(self, session: PaneHolder, *, part: int, seq: int) -> None:
        """The session closes: its ON_TIME pane, or after it (`late`) a last LATE pane if
        documents reached it since its previous pane (neither fired if it emits nothing)."""
        pane = self._pane(session)
        if not pane.counts[ON_TIME_DONE]:
            self.fire(session, ON_TIME, part=part, seq=seq)
        elif pane.counts[SINCE]:
            self.fire(session, LATE, part=part, seq=seq)

    def fire(self, session: PaneHolder, timing: str, *, part: int, seq: int) -> bool:
        """Fire the window's next pane of `timing`; False when it emits nothing. Either way
        the window's `every` timer is cleared (the next document arms it again)."""
        pane = self._pane(session)
        pane.timer = None
        firer, key = self.firer, session.uid
        if pane.content is None:
            members = pane.since if self.discarding else session.members
            pane.content = member_content(self.inner, members)
        firer.firing[key] = session
        firer.windows[key] = pane.content
        firer.emitted[key] = pane.emitted
        if firer.only_updated:
            firer.updated[key] = self._groups(pane.since)
        index = pane.counts[INDEX]
        self._retract_pending(session, {"index": index, "timing": timing}, part=part, seq=seq)
        try:
            fired = firer.fire(key, timing, pane.counts, part=part, seq=seq)
        finally:
            for held in (firer.firing, firer.windows, firer.emitted, firer.updated):
                held.pop(key, None)
        if not fired and pane.pending:  # a pane of retractions only is fired too
            pane.counts[INDEX], pane.counts[SINCE] = index + 1, 0
            fired = True
        if fired:
            pane.since, pane.pending = [], []
            if self.discarding:
                session.members, pane.content = [], self.inner.new_content()
        return fired

    def _retract_pending(
        self, session: PaneHolder, pane: dict[str, Any], *, part: int, seq: int
    ) -> None:
        retracted = {**pane, "retraction": True}
        for start, end, result in self._pane(session).pending:
            key, doc, meta = retraction(result, retracted, self.inner.spec.source.meta_field)
            self.out.result(
                part=part, seq=seq, start=start, end=end, key=key, doc=doc, meta=meta
            )  # fmt: skip

    def _groups(self, members: list[Member]) -> set[Any]:
        """The groups `members` update (`onlyUpdatedPanes`; None: a window without `$group`)."""
        items = [m.item for m in members if m.item is not None]
        if self.inner.group is None:
            return {None} if items else set()
        return {item[0] for item in items}

    @staticmethod
    def _pane(session: PaneHolder) -> SessionPane:
        if session.pane is None:
            raise RuntimeError("a session of a window with a trigger has pane state")
        return session.pane


__all__ = ["SessionPane", "SessionPanes"]
