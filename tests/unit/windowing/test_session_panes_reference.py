"""The operator's panes of session windows against the reference model (issue 25): on random
streams (disorder that extends and bridges sessions, late documents, two partitions with two
`$group` keys each) cut into random micro-batches, the operator function (no Spark; every call
round-trips the state through its pickle, as a restart from the checkpoint does) emits the same
panes and retractions, in the same order and in the same windows, as
`tests/conformance/reference_model.py`, for every mode and count trigger (`early` and, the
Beam model, `late`: ON_TIME when the watermark reaches a session's end, LATE panes until it
closes).
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import pytest

from pipeline_stages._windowing.runtime import config as C
from tests.unit.windowing.pane_runs import (
    KeyedDocs,
    keyed_operator_panes,
    keyed_reference_panes,
    ms,
    pane_results,
    reference_emitted,
)
from tests.unit.windowing.test_idle_wake import spec

GAP_MS = 3_000

#: `(early count, late count, onlyUpdatedPanes)`; None: no such phase trigger.
TRIGGERS = [
    (1, None, False),
    (2, None, False),
    (3, None, True),
    (1, None, True),
    (None, None, False),
    (None, 1, False),
    (2, 1, False),
    (1, 2, True),
]


def operator_panes(
    pane: C.PaneSpec, lateness_ms: int, docs: KeyedDocs, cuts: list[int]
) -> list[Any]:
    """`(start, end, partition, pane, key, n)` per result, in emission order."""
    return keyed_operator_panes("session", GAP_MS, lateness_ms, pane, docs, cuts)


def reference_panes(pane: C.PaneSpec, lateness_ms: int, docs: KeyedDocs) -> list[Any]:
    lateness = {"size": lateness_ms, "unit": "ms"} if lateness_ms else 0
    fields = {"gap": {"size": GAP_MS, "unit": "ms"}, "allowedLateness": lateness}
    return keyed_reference_panes("$sessionWindow", fields, pane, docs)


def stream(rng: random.Random) -> tuple[list[int], list[str], list[str]]:
    """`(times, keys, partitions)`: moving event times with disorder, and now and then a
    document at an earlier time of its partition (inside a session's bounds: with `late`, it
    reaches the session after its ON_TIME pane when the watermark passed its end)."""
    n = rng.randint(5, 40)
    event, times, parts = 0, [], []
    for _ in range(n):
        part = rng.choice("xy")
        earlier = [t for t, p in zip(times, parts, strict=True) if p == part]
        if earlier and rng.random() < 0.3:
            times.append(rng.choice(earlier))
        else:
            event += rng.choice([0, 500, 1_500, 2_500, 4_000, 7_000])
            times.append(max(0, event + rng.randint(-6_000, 1_000)))
        parts.append(part)
    return times, rng.choices("ab", k=n), parts


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize("seed", range(10))
def test_operator_session_panes_are_the_reference_models(
    mode: str, trigger: tuple[int | None, int | None, bool], seed: int
) -> None:
    rng = random.Random(seed)
    docs = stream(rng)
    early, late, only_updated = trigger
    lateness_ms = rng.choice([0, 2_000, 5_000] if late is None else [2_000, 5_000])
    pane = C.PaneSpec(mode=mode, early_count=early, late_count=late, only_updated=only_updated)
    expected = reference_panes(pane, lateness_ms, docs)
    n = len(docs[0])
    cuts = sorted(rng.sample(range(1, n), min(3, n - 1)))
    for at in ([], cuts, list(range(1, n))):
        assert operator_panes(pane, lateness_ms, docs, at) == expected, f"cuts {at}"
    assert expected, "the stream fires some pane"


def test_the_streams_merge_sessions_and_retract() -> None:
    """The random streams exercise what the test is about: retractions of merged-away
    windows (in other bounds than the pane that retracts them)."""
    merged = 0
    for seed in range(10):
        docs = stream(random.Random(seed))
        pane = C.PaneSpec(mode="accumulatingAndRetracting", early_count=1)
        results = reference_panes(pane, 2_000, docs)
        for at, (start, end, _, meta, _, _) in enumerate(results):
            fresh = next((r for r in results[at:] if not r[3].get("retraction")), (None, None))
            merged += bool(meta.get("retraction")) and (start, end) != fresh[:2]
    assert merged > 10


def _sorted_results(
    pane: C.PaneSpec, docs: tuple[list[int], list[str], list[str]], cuts: list[int]
) -> list[Any]:
    """The operator's `(start, pane, i)` per result of a session window whose inner pipeline
    is `$sort: {i: -1}` (buffered documents, not `$group` groups)."""
    times, keys, parts = docs
    base = spec(kind="session", hop_ms=GAP_MS, lateness_ms=2_000, idle_ms=None)
    inner = C.InnerPlan(sort=(("i", -1),), needs_doc=True, first_operator="SortOperator")
    op_spec = replace(base, inner=inner, panes=pane)
    texts = [json.dumps({"i": i, "k": k}) for i, k in enumerate(keys)]
    results = pane_results(op_spec, times, keys, cuts, partitions=parts, doc_texts=texts)
    return [(start, meta_pane, value["i"]) for start, meta_pane, value in results]


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("seed", range(6))
def test_session_panes_of_buffered_documents_are_the_reference_models(mode: str, seed: int) -> None:
    """Without `$group`, a pane holds documents; they have no `_id`, so they are one group
    (every earlier one is retracted before a pane). The parser requires a `$group` in a
    session's pipeline (as Atlas does); this covers the operator's buffered path anyway."""
    rng = random.Random(seed)
    docs = stream(rng)
    pane = C.PaneSpec(mode=mode, early_count=2)
    window = {
        "partitionBy": "$p",
        "gap": {"size": GAP_MS, "unit": "ms"},
        "allowedLateness": {"size": 2_000, "unit": "ms"},
        "trigger": {"early": {"count": 2}},
        "accumulationMode": mode,
        "pipeline": [{"$sort": {"i": -1}}],
    }
    fed = [
        {"t": {"$date": {"$numberLong": str(t)}}, "k": k, "p": p, "i": i}
        for i, (t, k, p) in enumerate(zip(*docs, strict=True))
    ]
    emitted = reference_emitted("$sessionWindow", window, fed)
    expected = [
        (
            ms(d["_stream_meta"]["window"]["start"]["$date"]),
            d["_stream_meta"]["window"]["pane"],
            d["i"],
        )
        for d in emitted
    ]
    n = len(docs[0])
    for at in ([], list(range(1, n))):
        assert _sorted_results(pane, docs, at) == expected, f"cuts {at}"
    assert expected


def test_the_streams_fire_late_panes() -> None:
    """With `late`, the random streams have documents that reach a session after its ON_TIME
    pane (allowed lateness), so LATE panes are compared, not only ON_TIME ones."""
    late_panes = 0
    for seed in range(10):
        docs = stream(random.Random(seed))
        pane = C.PaneSpec(mode="accumulating", late_count=1)
        results = reference_panes(pane, 5_000, docs)
        late_panes += sum(meta["timing"] == "LATE" for _, _, _, meta, _, _ in results)
    assert late_panes > 10
