"""Pieces the reference window operators share: the DLQ/output box and the inner pipeline."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bson import ObjectId

from pipeline_stages._documents.values import to_datetime_ms
from pipeline_stages._windowing.accumulators import GroupSpec
from tests.conformance.mini_stages import (
    BLOCKING,
    StageError,
    apply_stateless,
    parse_group_stage,
    prepare_group,
    run_group,
    sort_docs,
    stage_key,
)

LATE_REASON = "Input document arrived late."
STREAM_META = "_stream_meta"


@dataclass
class Outbox:
    """Everything the processor emitted and dead-lettered, in order.

    DLQ records have the §6.2 shape. `_id` and `dlqTime` are derived from a counter and the
    injected processing clock, so two runs over the same input give identical records.
    """

    processor_name: str = "reference"
    now_ms: int = 0
    emitted: list[dict[str, Any]] = field(default_factory=list)
    dlq: list[dict[str, Any]] = field(default_factory=list)
    _count: int = 0

    def dead_letter(
        self, doc: Mapping[str, Any] | None, operator: str, reason: str, **extra: Any
    ) -> None:
        """Append one DLQ record."""
        self._count += 1
        record: dict[str, Any] = {"_id": ObjectId(f"{self._count:024x}")}
        if doc is not None and isinstance(doc.get(STREAM_META), dict):
            record[STREAM_META] = copy.deepcopy(doc[STREAM_META])
        record["errInfo"] = {"reason": reason}
        record["operatorName"] = operator
        if doc is not None:
            record["doc"] = copy.deepcopy(dict(doc))
        record["processorName"] = self.processor_name
        record["dlqTime"] = to_datetime_ms(self.now_ms)
        record.update(extra)
        self.dlq.append(record)

    def late(self, doc: Mapping[str, Any], operator: str, missed_starts: list[int] | None) -> None:
        """§4.4: a (partially) late document; `missedWindowStartTimes` when known."""
        extra = {}
        if missed_starts is not None:
            extra["missedWindowStartTimes"] = [to_datetime_ms(s) for s in missed_starts]
        self.dead_letter(doc, operator, LATE_REASON, **extra)

    def failed(self, error: StageError) -> None:
        """A per-document stage error (§3.3, §6.3 items 6-7)."""
        self.dead_letter(error.doc, error.operator, error.reason)


def with_window_meta(doc: Mapping[str, Any], window: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `doc` whose `_stream_meta` has `window` merged in (§5)."""
    out = copy.deepcopy(dict(doc))
    meta = out.get(STREAM_META)
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta["window"] = dict(window)
    out[STREAM_META] = meta
    return out


@dataclass(frozen=True)
class Prepared:
    """A document admitted into a window: its arrival order, the document as the blocking
    stage sees it, and, for `$group`, its evaluated key and accumulator arguments."""

    order: int
    doc: dict[str, Any]
    key: Any = None
    values: tuple[Any, ...] = ()


class InnerPipeline:
    """A window's inner pipeline, split at its first blocking stage.

    `admit` runs the stateless prefix and evaluates the `$group` arguments when a document
    enters a window (errors are dead-lettered then, as the Atlas operators do); `finish` runs
    the blocking stage and everything after it when the window closes.
    """

    def __init__(self, stages: list[dict[str, Any]], outbox: Outbox, source_type: str) -> None:
        keys = [stage_key(s) for s in stages]
        cut = next((i for i, k in enumerate(keys) if k in BLOCKING), len(stages))
        self.prefix = stages[:cut]
        self.blocking = stages[cut] if cut < len(stages) else None
        self.rest = stages[cut + 1 :]
        self.group: GroupSpec | None = None
        if self.blocking is not None and stage_key(self.blocking) in ("$group", "$count"):
            self.group = parse_group_stage(self.blocking)
        self.outbox = outbox
        self.source_type = source_type
        self.first_operator = self._first_window_aware_operator(keys)

    @staticmethod
    def _first_window_aware_operator(keys: list[str]) -> str:
        # The planner inserts a dummy $limit when the first stage is not window-aware
        # ($group, $sort, $limit), so that operator is the one that DLQs late documents.
        first = keys[0] if keys else None
        return {"$group": "GroupOperator", "$count": "GroupOperator", "$sort": "SortOperator"}.get(
            first or "", "LimitOperator"
        )

    def admit(
        self, doc: Mapping[str, Any], window: Mapping[str, Any], order: int
    ) -> list[Prepared]:
        """Run the per-document part of the pipeline for a document entering a window."""
        meta = {"stream": {"source": {"type": self.source_type}, "window": dict(window)}}
        docs = [with_window_meta(doc, window)]
        try:
            for stage in self.prefix:
                docs = [out for d in docs for out in apply_stateless(stage, d, meta)]
        except StageError as error:
            self.outbox.failed(error)
            return []
        if self.group is None:
            return [Prepared(order, d) for d in docs]
        prepared = []
        for d in docs:
            try:
                key, values = prepare_group(self.group, d, meta)
            except StageError as error:
                self.outbox.failed(error)
                continue
            prepared.append(Prepared(order, d, key, tuple(values)))
        return prepared

    def finish(self, items: list[Prepared], window: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run the blocking stage and the rest of the pipeline when the window closes."""
        meta = {"stream": {"source": {"type": self.source_type}, "window": dict(window)}}
        items = sorted(items, key=lambda p: p.order)
        if self.blocking is None:
            docs = [p.doc for p in items]
        elif self.group is not None:
            prepared = [(p.order, p.doc, p.key, list(p.values)) for p in items]
            docs = self._group_output(self.blocking, run_group(self.group, prepared), window)
        else:
            docs = _sort_or_limit(self.blocking, [p.doc for p in items])
        if "pane" in window and self.group is None:
            # A pane's documents carry the window as it is when the pane fires (issue 25).
            docs = [with_window_meta(d, window) for d in docs]
        for stage in self.rest:
            docs = self._apply(stage, docs, meta, window)
        return docs

    def run(
        self, docs: list[tuple[int, Mapping[str, Any]]], window: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        """Admit `(order, doc)` pairs and finish at once (session and sliding windows)."""
        items = [p for order, doc in docs for p in self.admit(doc, window, order)]
        return self.finish(items, window)

    def _apply(
        self,
        stage: dict[str, Any],
        docs: list[dict[str, Any]],
        meta: Mapping[str, Any],
        window: Mapping[str, Any],
    ) -> list[dict[str, Any]]:
        key = stage_key(stage)
        if key in ("$group", "$count"):
            group = parse_group_stage(stage)
            prepared = []
            for order, doc in enumerate(docs):
                try:
                    group_key, values = prepare_group(group, doc, meta)
                except StageError as error:
                    self.outbox.failed(error)
                    continue
                prepared.append((order, doc, group_key, values))
            return self._group_output(stage, run_group(group, prepared), window)
        if key in BLOCKING:
            return _sort_or_limit(stage, docs)
        out = []
        for doc in docs:
            try:
                out.extend(apply_stateless(stage, doc, meta))
            except StageError as error:
                self.outbox.failed(error)
        return out

    def _group_output(
        self, stage: Mapping[str, Any], outputs: list[dict[str, Any]], window: Mapping[str, Any]
    ) -> list[dict[str, Any]]:
        if stage_key(stage) == "$count":
            return [{k: v for k, v in out.items() if k != "_id"} for out in outputs]
        # Doc example: {_id, _stream_meta: {source: {type}, window: {start, end}}, ...}.
        meta = {"source": {"type": self.source_type}, "window": dict(window)}
        return [
            {"_id": out["_id"], STREAM_META: meta, **{k: v for k, v in out.items() if k != "_id"}}
            for out in outputs
        ]


def _sort_or_limit(stage: Mapping[str, Any], docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if stage_key(stage) == "$sort":
        return sort_docs(stage["$sort"], docs)
    return docs[: int(stage["$limit"])]
