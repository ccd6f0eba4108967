"""The reference executor: a small, per-document, arrival-order model of atlas-semantics.md §4.

It is the spec of record the Spark window operator is checked against: the conformance
transcripts run through both and must give identical results. Processing time exists only as
an injected clock advanced by `idle(ms)`; input takes no time. Lateness is decided per
document against the watermark left by the documents before it, so results do not depend on
how input is cut into batches.

Supported: `$source` (`timeField`, `tsFieldName`, `streamMetaFieldName`,
`partitionIdleTimeout`), stateless stages before and after the window, `$tumblingWindow`,
`$hoppingWindow` (`offset`, `allowedLateness`, `idleTimeout`), `$sessionWindow`, Sluice's
`$slidingWindow` and `$globalWindow`, the pane extension (`trigger`, `accumulationMode`:
`reference_panes`; not on `$slidingWindow` yet), and a sink stage, which only marks the end of
the pipeline.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from pipeline_stages._base import UNIT_MS
from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import MqlError, to_ejson, to_epoch_ms
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.sliding import SlidingGeometry
from pipeline_stages._windowing.watermark import PartitionWatermarks
from tests.conformance.mini_mql import Scope, evaluate
from tests.conformance.mini_stages import StageError, apply_stateless, stage_key
from tests.conformance.reference_inner import STREAM_META, InnerPipeline, Outbox
from tests.conformance.reference_panes import PaneRules
from tests.conformance.reference_windows import (
    FixedWindows,
    GlobalWindow,
    SessionWindows,
    SlidingWindows,
)

WINDOW_STAGES = (
    "$tumblingWindow",
    "$hoppingWindow",
    "$sessionWindow",
    "$slidingWindow",
    "$globalWindow",
)
SINK_STAGES = ("$merge", "$emit")
DEFAULT_LATENESS_MS = 3_000  # §3.6: allowedLateness defaults to 3 seconds


def duration_ms(value: Any, *, default: int | None = None) -> int | None:
    """An Atlas duration `{size, unit}` (or the literal 0) in ms; `default` when absent."""
    if value is None:
        return default
    if value == 0:
        return 0
    return int(value["size"]) * UNIT_MS[value["unit"]]


def _source_type(source: Mapping[str, Any]) -> str:
    if "documents" in source:
        return "generated"
    if "topic" in source:
        return "kafka"
    if "db" in source or "coll" in source:
        return "atlas"
    return "generated"


@dataclass(frozen=True)
class Plan:
    """A pipeline cut into source, stages before the window, the window, stages after."""

    source: dict[str, Any]
    before: list[dict[str, Any]]
    window: dict[str, Any] | None
    after: list[dict[str, Any]]

    @classmethod
    def parse(cls, pipeline: list[dict[str, Any]]) -> Plan:
        stages = from_ejson(copy.deepcopy(pipeline))
        if not stages or stage_key(stages[0]) != "$source":
            raise ValueError("a pipeline starts with $source")
        body = [s for s in stages[1:] if stage_key(s) not in SINK_STAGES]
        at = next((i for i, s in enumerate(body) if stage_key(s) in WINDOW_STAGES), None)
        if at is None:
            return cls(stages[0]["$source"], body, None, [])
        return cls(stages[0]["$source"], body[:at], body[at], body[at + 1 :])


class ReferenceExecutor:
    """Runs a pipeline over fed documents; see the module docstring."""

    name = "reference"

    def start(self, pipeline: list[dict[str, Any]], *, partitions: int = 1) -> None:
        """Plan the pipeline and reset all state; processing time starts at 0."""
        self.plan = Plan.parse(pipeline)
        source = self.plan.source
        if "timeField" not in source:
            raise ValueError("the reference executor needs $source.timeField (event time)")
        self.source_type = _source_type(source)
        self.ts_field = source.get("tsFieldName", "_ts")
        self.meta_field = source.get("streamMetaFieldName", STREAM_META)
        self.outbox = Outbox()
        self.now_ms = 0
        self.idle_ms = 0
        self.order = 0
        self.watermarks = PartitionWatermarks.start(
            partitions, partition_idle_timeout_ms=duration_ms(source.get("partitionIdleTimeout"))
        )
        self.window = self._build_window(self.plan.window)
        for doc in source.get("documents") or []:
            self.feed([to_ejson(doc)])

    def _build_window(self, stage: dict[str, Any] | None) -> Any:
        if stage is None:
            return None
        key = stage_key(stage)
        spec = stage[key]
        if spec.get("boundary", "eventTime") != "eventTime":
            raise NotImplementedError("processingTime windows are not deterministic")
        inner = InnerPipeline(spec["pipeline"], self.outbox, self.source_type)
        lateness = duration_ms(spec.get("allowedLateness"), default=DEFAULT_LATENESS_MS)
        rules = PaneRules.of(spec)
        if key == "$globalWindow":
            if rules is None:
                raise ValueError("$globalWindow needs a trigger")
            return GlobalWindow(rules, inner=inner, outbox=self.outbox)
        if key == "$sessionWindow":
            return SessionWindows(
                gap_ms=duration_ms(spec["gap"]),
                lateness_ms=lateness,
                partition_by=spec["partitionBy"],
                inner=inner,
                outbox=self.outbox,
                rules=rules,
            )
        if key == "$slidingWindow":
            geometry = SlidingGeometry(
                duration_ms(spec["timeDifference"]), duration_ms(spec["grace"])
            )
            return SlidingWindows(
                geometry,
                partition_by=spec.get("partitionBy"),
                inner=inner,
                outbox=self.outbox,
                rules=rules,
            )
        interval = duration_ms(spec["interval"])
        hop = duration_ms(spec["hopSize"]) if key == "$hoppingWindow" else interval
        offset = spec.get("offset") or {}
        offset_ms = int(offset.get("offsetFromUtc", 0)) * UNIT_MS[offset.get("unit", "ms")]
        idle = duration_ms(spec.get("idleTimeout")) or None
        return FixedWindows(
            WindowGeometry(interval, hop, offset_ms),
            lateness_ms=lateness,
            idle_timeout_ms=idle,
            inner=inner,
            outbox=self.outbox,
            rules=rules,
        )

    # ------------------------------------------------------------------ executor protocol

    def feed(self, docs: list[dict[str, Any]], partition: int = 0) -> None:
        """One arrival batch on `partition` (relaxed Extended JSON documents)."""
        self.idle_ms = 0  # data resets the idle timer (§4.5 "any active watermark")
        for raw in docs:
            self._process(from_ejson(copy.deepcopy(raw)), partition)

    def idle(self, ms: int) -> None:
        """`ms` of processing time pass with no input on any partition."""
        end = self.now_ms + ms
        for instant in self.watermarks.idle_transitions(self.now_ms, end):
            self._advance_clock(instant)
            self._set_watermarks(self.watermarks.recombine(instant))
        self._advance_clock(end)
        self.idle_ms += ms
        if self.window is not None:
            self._through_window(self.window.on_clock, end)
            self._through_window(self.window.on_idle, self.idle_ms)

    def drain(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Output since the last drain, as relaxed Extended JSON."""
        emitted, dlq = self.outbox.emitted, self.outbox.dlq
        self.outbox.emitted, self.outbox.dlq = [], []
        return [to_ejson(d) for d in emitted], [to_ejson(d) for d in dlq]

    # ------------------------------------------------------------------ internals

    def _advance_clock(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.outbox.now_ms = now_ms

    def _process(self, doc: dict[str, Any], partition: int) -> None:
        t = self._event_time(doc)
        if t is None:
            return
        doc[self.ts_field] = from_ejson({"$date": {"$numberLong": str(t)}})
        if self.meta_field:
            meta = doc.get(self.meta_field)
            meta = dict(meta) if isinstance(meta, dict) else {}
            meta["source"] = {"type": self.source_type}
            doc[self.meta_field] = meta
        docs = self._run_stateless(self.plan.before, [doc])
        self.order += 1
        for d in docs:
            if self.window is None:
                self.outbox.emitted.extend(self._run_stateless(self.plan.after, [d]))
            else:
                # A count trigger can fire a pane here: it goes through the stages after.
                self._through_window(partial(self.window.on_document, d, t), self.order)
        self._set_watermarks(self.watermarks.observe(partition, t, self.now_ms))

    def _event_time(self, doc: dict[str, Any]) -> int | None:
        try:
            value = evaluate(self.plan.source["timeField"], Scope(doc))
        except MqlError as exc:
            self.outbox.dead_letter(doc, "SourceOperator", str(exc))
            return None
        if not isinstance(value, datetime):
            self.outbox.dead_letter(doc, "SourceOperator", "timeField did not evaluate to a date")
            return None
        return to_epoch_ms(value)

    def _set_watermarks(self, watermarks: PartitionWatermarks) -> None:
        changed = watermarks.combined != self.watermarks.combined
        self.watermarks = watermarks
        if self.window is not None and changed:
            self._through_window(self.window.on_watermark, watermarks.combined)

    def _through_window(self, step: Any, argument: int) -> None:
        """Run a window step and pass the windows it closes through the stages after it."""
        before = len(self.outbox.emitted)
        step(argument)
        closed = self.outbox.emitted[before:]
        del self.outbox.emitted[before:]
        self.outbox.emitted.extend(self._run_stateless(self.plan.after, closed))

    def _run_stateless(
        self, stages: list[dict[str, Any]], docs: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        meta = {"stream": {"source": {"type": self.source_type}}}
        for stage in stages:
            out = []
            for d in docs:
                window_meta = (
                    d.get(STREAM_META, {}).get("window")
                    if isinstance(d.get(STREAM_META), dict)
                    else None
                )
                scope_meta = (
                    {"stream": {**meta["stream"], "window": window_meta}} if window_meta else meta
                )
                try:
                    out.extend(apply_stateless(stage, d, scope_meta))
                except StageError as error:
                    self.outbox.failed(error)
            docs = out
        return docs
