"""The pane rules of the reference model (issue 25): triggers, accumulation modes, retractions.

A window with `trigger` fires *panes*; each pane runs the window's inner pipeline over the
pane's documents and stamps `_stream_meta.window.pane: {index, timing}` on what it emits.
This module is the spec of record of those rules; `reference_windows` hosts them in the fixed,
session and global windows. The rules, in the order they apply:

* **Contents** (per group of the inner `$group`; a window without `$group` is one group):
  `accumulating`: every document of the window so far; `discarding`: the documents since the
  previous pane; `onlyUpdatedPanes` keeps, of an accumulating pane, only the groups that
  received a document since the previous pane.
* **Not fired**: a pane whose pipeline emits nothing (and that has no retraction to emit) is
  not fired: it takes no index and the window's state stays as it was.
* **Retractions** (`accumulatingAndRetracting`): before a pane emits a group that an earlier
  pane emitted, the earlier documents of that group (same `_id`; documents without `_id` are
  one group) are emitted again as retractions, stamped with the new pane and
  `retraction: true`. Retractions inherited from merged-away session windows come first.
* **Count triggers** fire right after the N-th document that reached the window since its
  previous pane (documents are counted when they enter the window, before its inner stages,
  so a count does not depend on what the inner `$match` keeps).
* **Every triggers** (processing time): the first document since the previous pane sets the
  window's timer to `now + d`; when the clock reaches it, the pane fires.
* **Phases**: before the ON_TIME pane, `early` fires EARLY panes; after it, `late` fires LATE
  panes. Without `late`, ON_TIME fires when the window closes (Atlas's rule); with it, ON_TIME
  fires once the watermark reaches the window's end and a last LATE pane fires when it
  closes, if documents arrived since the previous pane.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline_stages._base import UNIT_MS
from pipeline_stages._documents.values import to_ejson
from tests.conformance.reference_inner import STREAM_META, InnerPipeline, Prepared

EARLY, ON_TIME, LATE = "EARLY", "ON_TIME", "LATE"


def _every_ms(firing: Mapping[str, Any] | None) -> int | None:
    every = (firing or {}).get("every")
    return None if every is None else int(every["size"]) * UNIT_MS[every["unit"]]


def _count(firing: Mapping[str, Any] | None) -> int | None:
    count = (firing or {}).get("count")
    return None if count is None else int(count)


@dataclass(frozen=True)
class PaneRules:
    """A window stage's `trigger` and `accumulationMode`."""

    mode: str
    only_updated: bool
    early_count: int | None
    early_every_ms: int | None
    late_count: int | None
    late_every_ms: int | None
    has_late: bool

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> PaneRules | None:
        """The rules of a window stage body; None without `trigger` (Atlas's one result)."""
        trigger = spec.get("trigger")
        if trigger is None:
            return None
        early, late = trigger.get("early"), trigger.get("late")
        return cls(
            mode=spec.get("accumulationMode", "accumulating"),
            only_updated=bool(trigger.get("onlyUpdatedPanes", False)),
            early_count=_count(early),
            early_every_ms=_every_ms(early),
            late_count=_count(late),
            late_every_ms=_every_ms(late),
            has_late=late is not None,
        )


def _group_of(key: Any) -> str:
    return json.dumps(to_ejson(key), sort_keys=True, default=str)


def _output_group(doc: Mapping[str, Any]) -> str:
    return _group_of(doc.get("_id"))


def stamp_pane(doc: Mapping[str, Any], pane: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `doc` whose `_stream_meta.window.pane` is `pane`."""
    out = copy.deepcopy(dict(doc))
    meta = out.get(STREAM_META)
    meta = dict(meta) if isinstance(meta, dict) else {}
    window = meta.get("window")
    meta["window"] = {**(window if isinstance(window, dict) else {}), "pane": dict(pane)}
    out[STREAM_META] = meta
    return out


@dataclass
class PaneWindow:
    """One window's documents and pane state (a window without rules keeps documents only)."""

    rules: PaneRules | None
    items: list[Prepared] = field(default_factory=list)
    since: list[Prepared] = field(default_factory=list)
    arrived_since: int = 0
    index: int = 0
    on_time_fired: bool = False
    timer_ms: int | None = None
    #: What earlier panes emitted, per output group (for retractions).
    emitted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: Results of merged-away session windows, retracted before this window's next pane.
    pending: list[dict[str, Any]] = field(default_factory=list)

    # ------------------------------------------------------------------ arrivals

    def add(self, prepared: list[Prepared], now_ms: int) -> None:
        """One document reached the window (`prepared`: what its inner prefix made of it)."""
        self.items.extend(prepared)
        self.since.extend(prepared)
        self.arrived_since += 1
        every = self._every_ms()
        if every is not None and self.timer_ms is None:
            self.timer_ms = now_ms + every

    def count_due(self) -> bool:
        """Whether the phase's count trigger fires now."""
        count = self._count()
        return count is not None and self.arrived_since >= count

    def timer_due(self, now_ms: int) -> bool:
        """Whether the phase's processing-time trigger fires at `now_ms`."""
        return self.timer_ms is not None and self.timer_ms <= now_ms

    @property
    def timing(self) -> str:
        """The timing of a pane fired by the current phase's trigger."""
        return LATE if self.on_time_fired else EARLY

    def _count(self) -> int | None:
        rules = self.rules
        if rules is None:
            return None
        return rules.late_count if self.on_time_fired else rules.early_count

    def _every_ms(self) -> int | None:
        rules = self.rules
        if rules is None:
            return None
        return rules.late_every_ms if self.on_time_fired else rules.early_every_ms

    # ------------------------------------------------------------------ firing

    def fire(self, timing: str, inner: InnerPipeline, meta: Mapping[str, Any]) -> list[Any]:
        """Fire one pane of `timing` (see the module docstring); returns what it emits."""
        rules = self.rules
        if rules is None:
            raise ValueError("a window without trigger fires no panes")
        pane = {"index": self.index, "timing": timing}
        contents = self._contents(rules)
        docs = inner.finish(contents, {**meta, "pane": pane}) if contents else []
        if not docs and not self.pending:
            self.timer_ms = None
            return []
        out = [stamp_pane(d, {**pane, "retraction": True}) for d in self.pending]
        out += self._with_retractions(rules, docs, pane)
        self.index += 1
        self.since, self.arrived_since, self.timer_ms, self.pending = [], 0, None, []
        if rules.mode == "discarding":
            self.items = []  # a discarding window needs nothing of its past
        return out

    def _contents(self, rules: PaneRules) -> list[Prepared]:
        if rules.mode == "discarding":
            return list(self.since)
        if rules.only_updated:
            updated = {_group_of(p.key) for p in self.since}
            return [p for p in self.items if _group_of(p.key) in updated]
        return list(self.items)

    def _with_retractions(
        self, rules: PaneRules, docs: list[dict[str, Any]], pane: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        if rules.mode != "accumulatingAndRetracting":
            return docs
        out: list[dict[str, Any]] = []
        fresh: dict[str, list[dict[str, Any]]] = {}
        for doc in docs:
            group = _output_group(doc)
            if group not in fresh:
                retracted = self.emitted.pop(group, [])
                out += [stamp_pane(d, {**pane, "retraction": True}) for d in retracted]
            fresh.setdefault(group, []).append(doc)
            out.append(doc)
        self.emitted.update(fresh)
        return out

    def reach_end(self, inner: InnerPipeline, meta: Mapping[str, Any]) -> list[Any]:
        """The watermark reached the window's end: the ON_TIME pane of the `late` model."""
        if self.rules is None or not self.rules.has_late or self.on_time_fired:
            return []
        out = self.fire(ON_TIME, inner, meta)
        self.on_time_fired = True
        self.since, self.arrived_since, self.timer_ms = [], 0, None
        return out

    def close(self, inner: InnerPipeline, meta: Mapping[str, Any]) -> list[Any]:
        """The window closes: Atlas's one result, else the last pane (ON_TIME or LATE)."""
        if self.rules is None:
            return inner.finish(self.items, meta)
        if self.on_time_fired:
            return self.fire(LATE, inner, meta) if self.arrived_since else []
        return self.fire(ON_TIME, inner, meta)

    def absorb(self, others: list[PaneWindow]) -> None:
        """Merge the state of session windows merged into this new one (issue 25: the
        merged-away windows' results are retracted before this window's next pane)."""
        for other in others:
            self.items.extend(other.items)
            self.since.extend(other.since)
            self.arrived_since += other.arrived_since
            self.pending.extend(other.pending)
            if self.rules is not None and self.rules.mode == "accumulatingAndRetracting":
                self.pending.extend(d for docs in other.emitted.values() for d in docs)
            if other.timer_ms is not None:
                self.timer_ms = min(other.timer_ms, self.timer_ms or other.timer_ms)
        self.items.sort(key=lambda p: p.order)
        self.since.sort(key=lambda p: p.order)
