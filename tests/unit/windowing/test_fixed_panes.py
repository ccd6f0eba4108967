"""Count-based EARLY panes and the ON_TIME pane of tumbling and hopping windows, driving the
operator function itself (no Spark; `runtime.panes`, issue 25).

On random streams (disorder, late documents, several keys): the panes do not depend on how
the documents are cut into micro-batches (every call also round-trips the state through its
pickle, as a restart from the checkpoint does), and each pane holds what its mode says: an
accumulating EARLY pane k of a window counts (k + 1) * N documents, a discarding one N, and
the ON_TIME pane the window's total (accumulating) or the rest since the last EARLY pane
(discarding; not fired when there is none).
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

from pipeline_stages._stream.frame import KIND_OUTPUT
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.operator import make_operator
from tests.unit.windowing.group_state import FakeState
from tests.unit.windowing.pane_runs import pane_results
from tests.unit.windowing.test_idle_wake import rows, spec

SIZE_MS = 10_000


def pane_spec(mode: str, count: int | None, hop_ms: int, lateness_ms: int) -> C.OperatorSpec:
    base = spec(lateness_ms=lateness_ms, idle_ms=None)
    return replace(
        base,
        geometry=WindowGeometry(interval_ms=SIZE_MS, hop_ms=hop_ms, offset_ms=0),
        panes=C.PaneSpec(mode=mode, early_count=count),
    )


def run(op_spec: C.OperatorSpec, times: list[int], keys: list[str], cuts: list[int]) -> list[Any]:
    """Feed the documents in calls cut at `cuts`; the results `(window start, pane, key, n)`
    in emission order."""
    return [
        (start, pane["index"], pane["timing"], value["_id"], value["n"])
        for start, pane, value in pane_results(op_spec, times, keys, cuts)
    ]


def stream(rng: random.Random) -> tuple[list[int], list[str]]:
    n = rng.randint(5, 40)
    event, times = 0, []
    for _ in range(n):
        event += rng.randint(0, 3_000)
        times.append(max(0, event + rng.randint(-4_000, 1_000)))
    return times, rng.choices("ab", k=n)


@pytest.mark.parametrize("mode", ["accumulating", "discarding"])
@pytest.mark.parametrize("hop_ms", [SIZE_MS, 5_000])
@pytest.mark.parametrize("seed", range(10))
def test_panes_do_not_depend_on_batch_size(mode: str, hop_ms: int, seed: int) -> None:
    rng = random.Random(seed)
    times, keys = stream(rng)
    op_spec = pane_spec(mode, rng.choice([1, 2, 3]), hop_ms, rng.choice([0, 2_000]))
    whole = run(op_spec, times, keys, [])
    one_by_one = run(op_spec, times, keys, list(range(1, len(times))))
    chunks = run(op_spec, times, keys, sorted(rng.sample(range(1, len(times)), 3)))
    assert whole == one_by_one == chunks
    assert whole, "the stream fires some pane"


@pytest.mark.parametrize("mode", ["accumulating", "discarding"])
@pytest.mark.parametrize("hop_ms", [SIZE_MS, 5_000])
@pytest.mark.parametrize("seed", range(10))
def test_each_pane_holds_what_its_mode_says(mode: str, hop_ms: int, seed: int) -> None:
    rng = random.Random(seed)
    every = rng.choice([1, 2, 3])
    times, keys = stream(rng)
    # Ends far past every window, so that every window closes and fires its ON_TIME pane.
    times, keys = [*times, max(times) + 10 * SIZE_MS], [*keys, "a"]
    panes: dict[tuple[int, int, str], int] = defaultdict(int)
    for start, index, timing, _key, n in run(pane_spec(mode, every, hop_ms, 0), times, keys, []):
        panes[(start, index, timing)] += n
    per_window: dict[int, list[tuple[int, str, int]]] = defaultdict(list)
    for (start, index, timing), n in sorted(panes.items()):
        per_window[start].append((index, timing, n))
    for start, fired in per_window.items():
        if start + SIZE_MS > times[-1]:
            continue  # the window of the closing document: still open
        assert [index for index, _, _ in fired] == list(range(len(fired)))
        if mode == "accumulating":
            *early, last = fired
            assert [t for _, t, _ in early] == ["EARLY"] * len(early) and last[1] == "ON_TIME"
            assert [n for _, _, n in early] == [every * (k + 1) for k in range(len(early))]
            assert last[2] >= (early[-1][2] if early else 1)
        else:
            # The ON_TIME pane holds the rest since the last EARLY one: not fired when empty.
            early = fired[:-1] if fired[-1][1] == "ON_TIME" else fired
            assert all(t == "EARLY" and n == every for _, t, n in early)
            if fired[-1][1] == "ON_TIME":
                assert 1 <= fired[-1][2] < every


def test_a_spec_without_panes_emits_no_pane() -> None:
    op_spec = spec(lateness_ms=0, idle_ms=None)
    operator = make_operator(op_spec)
    frame = pd.concat(
        list(operator((0,), iter([rows(0, [1_000, 2_000, 25_000], ["a"] * 3)]), FakeState(None, 1)))
    )
    metas = [json.loads(m)["window"] for m in frame[frame["kind"] == KIND_OUTPUT]["meta"]]
    assert metas and all("pane" not in m for m in metas)


def test_a_pane_that_would_emit_nothing_is_not_fired() -> None:
    """Documents the inner `$match` drops count, but a pane over none is not fired: it takes
    no index and the next document tries again (the reference model's rule)."""
    operator = make_operator(pane_spec("discarding", 2, SIZE_MS, 0))
    batch = rows(0, [1_000, 2_000, 3_000, 4_000, 25_000], ["a"] * 5)
    batch[C.FLAG] = pd.Series([C.FLAG_DROPPED_INSIDE] * 2 + [C.FLAG_OK] * 3, dtype="int8")
    frame = pd.concat(list(operator((0,), iter([batch]), FakeState(None, 1))))
    results = frame[frame["kind"] == KIND_OUTPUT].sort_values(["seq", "sub"])
    got = [
        (int(seq), json.loads(meta)["window"]["pane"], json.loads(doc)["n"])
        for seq, meta, doc in zip(results["seq"], results["meta"], results["doc"], strict=True)
    ]
    assert got == [
        (2, {"index": 0, "timing": "EARLY"}, 1),  # the attempt after document 1 emitted nothing
        (4, {"index": 1, "timing": "ON_TIME"}, 1),  # document 3; 25 s closes [0, 10)
    ]
