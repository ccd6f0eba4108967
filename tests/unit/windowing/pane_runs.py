"""Driving the window operator function over documents fed in calls, for the pane tests."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import Any

import pandas as pd

from pipeline_stages._stream.frame import KIND_OUTPUT
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.operator import make_operator
from tests.conformance.reference_model import ReferenceExecutor
from tests.unit.windowing.group_state import FakeState
from tests.unit.windowing.test_idle_wake import rows, spec


def pane_results(
    op_spec: C.OperatorSpec,
    times: list[int],
    keys: list[str],
    cuts: list[int],
    partitions: list[str] | None = None,
    doc_texts: list[str] | None = None,
) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """Feed the documents in calls cut at `cuts`, the state pickled between calls; the
    results `(window start, pane of the result's metadata, result document)` in emission
    order. `partitions`: the documents' `partitionBy` values (default: their keys);
    `doc_texts`: their JSON, for a window that buffers documents."""
    operator = make_operator(op_spec)
    blob, out = None, []
    bounds = [0, *cuts, len(times)]
    for n, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if lo == hi:
            continue
        state = FakeState(blob, 1_000_000 + n)
        batch = rows(lo, times[lo:hi], keys[lo:hi])
        if partitions is not None:
            batch[C.PKEY] = [f'"{p}"' for p in partitions[lo:hi]]
        if doc_texts is not None:
            batch[C.DOCJ] = doc_texts[lo:hi]
        frame = pd.concat(list(operator((0,), iter([batch]), state)))
        blob = state.blob
        results = frame[frame["kind"] == KIND_OUTPUT].sort_values(["seq", "part", "sub"])
        for start, doc, meta in zip(
            results["window_start"], results["doc"], results["meta"], strict=True
        ):
            out.append((int(start), json.loads(meta)["window"]["pane"], json.loads(doc)))
    return out


def reference_trigger(pane: C.PaneSpec, only_updated: bool) -> dict[str, Any]:
    """The window's `trigger` field for the count-based panes `pane` describes."""
    trigger: dict[str, Any] = {"onlyUpdatedPanes": only_updated}
    if pane.early_count is not None:
        trigger["early"] = {"count": pane.early_count}
    if pane.late_count is not None:
        trigger["late"] = {"count": pane.late_count}
    return trigger


def reference_emitted(stage: str, window: dict[str, Any], docs: list[dict[str, Any]]) -> list[Any]:
    """What the reference model emits for `docs` (event time in `t`, fed as one arrival
    batch) through the window stage `stage` with body `window`."""
    executor = ReferenceExecutor()
    executor.start([{"$source": {"timeField": "$t"}}, {stage: window}])
    executor.feed(docs)
    emitted, _ = executor.drain()
    return emitted


#: A keyed stream: `(event times, $group keys, partitionBy values)`.
KeyedDocs = tuple[list[int], list[str], list[str]]


def ms(date: str) -> int:
    """Epoch ms of an ISO date (as the results' `$date` text shows it)."""
    return round(datetime.fromisoformat(date).timestamp() * 1000)


def keyed_operator_panes(
    kind: str, size_ms: int, lateness_ms: int, pane: C.PaneSpec, docs: KeyedDocs, cuts: list[int]
) -> list[Any]:
    """The operator's `(start, end, partition, pane, key, n)` per result of a session or
    sliding window (`kind`, `size_ms`: its gap or time difference) over `docs` fed in calls
    cut at `cuts`, in emission order."""
    times, keys, parts = docs
    base = spec(kind=kind, hop_ms=size_ms, lateness_ms=lateness_ms, idle_ms=None)
    out = []
    for start, meta_pane, value in pane_results(
        replace(base, panes=pane), times, keys, cuts, partitions=parts
    ):
        window = value["_stream_meta"]["window"]
        assert window["pane"] == meta_pane
        assert ms(window["start"]["$date"]) == start
        end = ms(window["end"]["$date"])
        out.append((start, end, window["partition"], meta_pane, value["_id"], value["n"]))
    return out


def keyed_reference_panes(
    stage: str, fields: dict[str, Any], pane: C.PaneSpec, docs: KeyedDocs
) -> list[Any]:
    """The reference model's tuples (as `keyed_operator_panes`) for window stage `stage`
    whose size and lateness fields are `fields`, partitioned by `$p`, grouped by `$k`."""
    window = {
        "partitionBy": "$p",
        **fields,
        "trigger": reference_trigger(pane, pane.only_updated),
        "accumulationMode": pane.mode,
        "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
    }
    fed = [
        {"t": {"$date": {"$numberLong": str(t)}}, "k": k, "p": p}
        for t, k, p in zip(*docs, strict=True)
    ]
    out = []
    for d in reference_emitted(stage, window, fed):
        window = d["_stream_meta"]["window"]
        start, end = ms(window["start"]["$date"]), ms(window["end"]["$date"])
        out.append((start, end, window["partition"], window["pane"], d["_id"], d["n"]))
    return out
