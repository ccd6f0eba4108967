"""The operator's panes of tumbling and hopping windows against the reference model (issue
25): on random streams (disorder, late documents, several keys) cut into random
micro-batches, the operator function (no Spark; every call round-trips the state through its
pickle, as a restart from the checkpoint does) emits the same panes, in the same order, as
`tests/conformance/reference_model.py`, for every trigger and mode the operator fires. And a
watermark rise outside a document (partition idleness) fires the ON_TIME pane of `late`.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import datetime
from typing import Any

import pandas as pd
import pytest

from pipeline_stages._stream.frame import KIND_OUTPUT
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.operator import make_operator
from tests.unit.windowing.group_state import FakeState
from tests.unit.windowing.pane_runs import pane_results, reference_emitted, reference_trigger
from tests.unit.windowing.test_idle_wake import rows, spec

SIZE_MS = 10_000
EPOCH = "2024-01-01T00:00:00.000Z"

#: `(early count, late count, onlyUpdatedPanes)` the operator fires.
TRIGGERS = [
    (2, None, False),
    (None, 1, False),
    (3, 2, False),
    (1, 1, False),
    (2, None, True),
    (1, 2, True),
]


def operator_spec(pane: C.PaneSpec, hop_ms: int, lateness_ms: int) -> C.OperatorSpec:
    base = spec(lateness_ms=lateness_ms, idle_ms=None)
    geometry = WindowGeometry(interval_ms=SIZE_MS, hop_ms=hop_ms, offset_ms=0)
    return replace(base, geometry=geometry, panes=pane)


def operator_panes(
    op_spec: C.OperatorSpec, times: list[int], keys: list[str], cuts: list[int]
) -> list[Any]:
    """`(window start, pane, key, n)` per result, in emission order."""
    out = []
    for start, pane, value in pane_results(op_spec, times, keys, cuts):
        assert value["_stream_meta"]["window"]["pane"] == pane
        out.append((start, pane, value["_id"], value["n"]))
    return out


def reference_panes(
    pane: C.PaneSpec,
    only_updated: bool,
    hop_ms: int,
    lateness_ms: int,
    times: list[int],
    keys: list[str],
    after_group: list[dict[str, Any]] | None = None,
) -> list[Any]:
    window = {
        "interval": {"size": SIZE_MS, "unit": "ms"},
        "hopSize": {"size": hop_ms, "unit": "ms"},
        "allowedLateness": {"size": lateness_ms, "unit": "ms"} if lateness_ms else 0,
        "trigger": reference_trigger(pane, only_updated),
        "accumulationMode": pane.mode,
        "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}, *(after_group or [])],
    }
    docs = [
        {"t": {"$date": {"$numberLong": str(t)}}, "k": k} for t, k in zip(times, keys, strict=True)
    ]
    emitted = reference_emitted("$hoppingWindow", window, docs)
    start_of = lambda d: d["_stream_meta"]["window"]["start"]["$date"]  # noqa: E731
    return [(start_of(d), d["_stream_meta"]["window"]["pane"], d["_id"], d["n"]) for d in emitted]


def stream(rng: random.Random) -> tuple[list[int], list[str]]:
    n = rng.randint(5, 40)
    event, times = 0, []
    for _ in range(n):
        event += rng.randint(0, 3_000)
        times.append(max(0, event + rng.randint(-6_000, 1_000)))
    return times, rng.choices("ab", k=n)


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize("hop_ms", [SIZE_MS, 5_000])
@pytest.mark.parametrize("seed", range(8))
def test_operator_panes_are_the_reference_models(
    mode: str, trigger: tuple[int | None, int | None, bool], hop_ms: int, seed: int
) -> None:
    rng = random.Random(seed)
    times, keys = stream(rng)
    early, late, only_updated = trigger
    lateness_ms = rng.choice([0, 2_000, 5_000]) if late is None else rng.choice([2_000, 5_000])
    pane = C.PaneSpec(mode=mode, early_count=early, late_count=late, only_updated=only_updated)
    expected = reference_panes(pane, only_updated, hop_ms, lateness_ms, times, keys)
    op_spec = operator_spec(pane, hop_ms, lateness_ms)
    cuts = sorted(rng.sample(range(1, len(times)), min(3, len(times) - 1)))
    for at in ([], cuts, list(range(1, len(times)))):
        got = operator_panes(op_spec, times, keys, at)
        assert [(start, p, k, n) for start, p, k, n in got] == [
            (_ms(start), p, k, n) for start, p, k, n in expected
        ], f"cuts {at}"
    assert expected, "the stream fires some pane"


def _ms(date: str) -> int:
    return round(datetime.fromisoformat(date).timestamp() * 1000)


#: `$match` filters after the `$group` that empty some panes (the operator runs them).
MATCHES = [
    {"n": {"$gte": 3}},
    {"$or": [{"n": {"$in": [2, 5, 6]}}, {"_id": "b", "n": {"$gte": 4}}], "_id": {"$ne": "c"}},
]


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize("match", MATCHES)
@pytest.mark.parametrize("seed", range(4))
def test_a_match_after_the_group_fires_the_reference_models_panes(
    mode: str, trigger: tuple[int | None, int | None, bool], match: dict[str, Any], seed: int
) -> None:
    """A pane the `$match` empties is not fired and takes no index, and only what it keeps
    is retracted later."""
    rng = random.Random(seed)
    times, keys = stream(rng)
    early, late, only_updated = trigger
    lateness_ms = rng.choice([0, 2_000, 5_000]) if late is None else rng.choice([2_000, 5_000])
    pane = C.PaneSpec(mode=mode, early_count=early, late_count=late, only_updated=only_updated)
    after = [{"$match": match}]
    expected = reference_panes(pane, only_updated, SIZE_MS, lateness_ms, times, keys, after)
    base = operator_spec(pane, SIZE_MS, lateness_ms)
    op_spec = replace(base, inner=replace(base.inner, later=(C.LaterStage("$match", match),)))
    for at in ([], list(range(1, len(times)))):
        got = operator_panes(op_spec, times, keys, at)
        assert got == [(_ms(start), p, k, n) for start, p, k, n in expected], f"cuts {at}"


def test_a_watermark_rise_from_partition_idleness_fires_the_on_time_pane() -> None:
    """With `late`, a rise of the watermark outside a document (a partition turns idle) fires
    the ON_TIME pane of the windows it reaches; they stay open for LATE panes until Atlas's
    rule closes them."""
    base = spec(lateness_ms=5_000, idle_ms=None, partitions=2, partition_idle_timeout_ms=1_000)
    operator = make_operator(replace(base, panes=C.PaneSpec(mode="accumulating", late_count=1)))

    def call(blob: bytes | None, now_ms: int, batch: pd.DataFrame | None) -> tuple[Any, list[Any]]:
        state = FakeState(blob, now_ms)
        frame = pd.concat(list(operator((0,), iter([] if batch is None else [batch]), state)))
        results = frame[frame["kind"] == KIND_OUTPUT].sort_values(["seq", "part", "sub"])
        panes = [
            (int(start), json.loads(meta)["window"]["pane"], json.loads(doc)["n"])
            for start, doc, meta in zip(
                results["window_start"], results["doc"], results["meta"], strict=True
            )
        ]
        return state.blob, panes

    # Partition 0 holds the watermark at 0.999 s; partition 1's documents are in [10 s, 20 s).
    blob, panes = call(None, 1_000_000, rows(0, [1_000, 12_000], ["a", "a"], parts=[0, 1]))
    assert panes == []
    blob, panes = call(blob, 1_000_500, rows(2, [12_000], ["b"], parts=[1]))
    assert panes == []
    # Partition 0 turns idle (partition 1 not yet): W = 11.999 s >= 10 s, W - 5 s < 10 s:
    # the ON_TIME pane, and [0, 10) stays open.
    blob, panes = call(blob, 1_001_200, None)
    assert panes == [(0, {"index": 0, "timing": "ON_TIME"}, 1)]
    # A late but allowed document fires a LATE pane.
    blob, panes = call(blob, 1_001_300, rows(3, [3_000], ["a"], parts=[1]))
    assert panes == [(0, {"index": 1, "timing": "LATE"}, 2)]
