"""What one pane of a fixed window holds and emits (issue 25; `runtime.panes` decides when
panes fire; the rules of record are tests/conformance/reference_panes.py).

* `accumulating`: the window's content so far; `discarding`: the content since the window's
  previous pane, which is emptied after each fired pane;
* `onlyUpdatedPanes` (accumulating): of the window's content, only the `$group` groups that
  received a document since the window's previous pane (a window without `$group` is one
  group). The updated groups per window are kept in `FixedState.pane_updated`;
* `accumulatingAndRetracting`: accumulating panes, and before a pane emits a group (the
  `_id` of its output documents; documents without `_id` are one group) that an earlier pane
  emitted, one retraction per document of that group's last emission: a copy of it stamped
  with the new pane and `"retraction": true`. The last emission per group and window is kept
  in `FixedState.pane_emitted` (stages after the window, which run in Spark, then run on the
  retractions too, as on every pane);
* a pane that emits nothing is not fired: it takes no index and changes nothing.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import sort_key
from pipeline_stages._stream.frame import KIND_OUTPUT
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.emit import Emitter, Segment
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.values import decode_json, encode

#: One emitted result, as a retraction copies it: `(key, document text, metadata text)`.
Emitted = tuple[str, str, str]
#: Envelope keys of retractions (`window_key`), apart from the results they retract.
RETRACTION_KEY = "retraction:"

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
        emitted: Per open window and output group, its last emission
            (`accumulatingAndRetracting` only; `FixedState.pane_emitted`).
    """

    def __init__(
        self,
        spec: C.PaneSpec,
        inner: InnerRuntime,
        out: Emitter,
        windows: dict[int, Any],
        size: int,
        updated: dict[int, set[Any]],
        emitted: dict[int, dict[Any, list[Emitted]]],
    ) -> None:
        self.spec = spec
        self.inner = inner
        self.out = out
        self.windows = windows
        self.size = size
        self.only_updated = spec.only_updated and spec.mode != "discarding"
        self.updated = updated
        self.retracting = spec.mode == "accumulatingAndRetracting"
        self.emitted = emitted

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
        pane = {"index": counts[0], "timing": timing}
        out = Emitter(self.out.source) if self.retracting else self.out
        before = out.results
        lo, hi, extra = self.bounds(start)
        self.inner.bind(out)
        try:
            self.inner.emit(
                self.content(start), start=lo, end=hi, part=part, seq=seq, pane=pane, **extra
            )
        finally:
            self.inner.bind(self.out)
        if out.results == before:
            return False
        if self.retracting:
            self._with_retractions(start, out.rows, pane)
        counts[0] += 1
        counts[1] = 0
        self.forget_since(start)
        return True

    def _with_retractions(
        self, start: int, rows: list[tuple[Any, ...]], pane: dict[str, Any]
    ) -> None:
        """Emit a pane's result `rows` (envelopes), each group's first one preceded by the
        retractions of that group's last emission by an earlier pane."""
        last = self.emitted.setdefault(start, {})
        fresh: dict[Any, list[Emitted]] = {}
        retracted = {**pane, "retraction": True}
        meta_field = self.inner.spec.source.meta_field
        for row in rows:
            kind, part, seq, _, _, doc, meta, *_, key = row
            if kind != KIND_OUTPUT:  # not written by `InnerRuntime.emit` today; kept in order
                self.out.rows.append(row)
                self.out.dlq_count += 1
                continue
            group = _output_group(doc)
            if group not in fresh:
                fresh[group] = []
                for earlier in last.pop(group, []):
                    self._emit(start, part, seq, *retraction(earlier, retracted, meta_field))
            fresh[group].append((key, doc, meta))
            self._emit(start, part, seq, key, doc, meta)
        last.update(fresh)

    def _emit(self, start: int, part: int, seq: int, key: str, doc: str, meta: str) -> None:
        lo, hi, _ = self.bounds(start)
        self.out.result(part=part, seq=seq, start=lo, end=hi, key=key, doc=doc, meta=meta)

    def bounds(self, start: int) -> tuple[int, int, dict[str, Any]]:
        """The start and end of the window `start` names, and what else its emission passes
        to `InnerRuntime.emit` (session windows are named otherwise: `runtime.session_panes`)."""
        return start, start + self.size, {}

    def forget_since(self, start: int) -> None:
        """A phase of the window ended (a fired pane, its ON_TIME point): a discarding window
        drops its content, and no group of it counts as updated any more."""
        if self.spec.mode == "discarding":
            self.windows[start] = self.inner.new_content()
        self.updated.pop(start, None)

    def drop(self, start: int) -> None:
        """The window closed: forget what its panes kept."""
        self.updated.pop(start, None)
        self.emitted.pop(start, None)


def retraction(result: Emitted, retracted: dict[str, Any], meta_field: str) -> Emitted:
    """The retraction of an emitted result: its key marked, its document (whose stream
    metadata is `meta_field`, the source's `streamMetaFieldName`) and metadata stamped with
    `retracted` (the new pane, with `"retraction": true`)."""
    key, doc, meta = result
    return (
        RETRACTION_KEY + key,
        restamp(doc, retracted, field=meta_field),
        restamp(meta, retracted, field=None),
    )


def restamp(text: str, pane: dict[str, Any], *, field: str | None) -> str:
    """A result's document text with `pane` as the pane of its stream metadata (`field`; an
    empty name: the document holds none), or with `field=None` the metadata's own text.

    Results are written by `encode`, so their pane is the text `"pane":{"index":i,...}` with
    no space; when that text occurs once it is the pane, and is replaced as text (decoding and
    re-encoding each retracted document cost ~6x the pane itself:
    `benchmarks/window_panes.py`). Otherwise (a document whose own data holds the same text)
    the document is decoded."""
    if field == "":
        return text
    marker = '"pane":{"index":'
    at = text.find(marker)
    if at >= 0 and text.find(marker, at + 1) < 0:
        end = text.find("}", at + len(marker))
        if end >= 0:
            return text[: at + 7] + encode(pane) + text[end + 1 :]
    value = decode_json(text)
    holder: Any = value if field is None else value.get(field) if isinstance(value, dict) else None
    if not _holds_pane(holder):
        return text
    holder["window"] = {**holder["window"], "pane": pane}
    return encode(value)


def _output_group(doc: str) -> Any:
    """The retraction group of a result document: its `_id`'s sort key (None without one).
    Only `_id` is decoded from Extended JSON: the rest of the document is not needed."""
    raw = json.loads(doc)
    ident = raw.get("_id") if isinstance(raw, dict) else None
    return sort_key(from_ejson(ident))


def _holds_pane(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("window"), dict)
        and isinstance(value["window"].get("pane"), dict)
    )
