"""The operator's panes of sliding windows against the reference model (issue 25): on random
streams (disorder, late and fully late records, two partitions with two `$group` keys each)
cut into random micro-batches, the operator function (no Spark; every call round-trips the
state through its pickle, as a restart from the checkpoint does) emits the same panes and
retractions, in the same order and in the same windows, as
`tests/conformance/reference_model.py`: a record counts for every open window it reaches, and
a window it creates starts with all the records it holds (Kafka Streams' emit-on-update with
`early: {count: 1}`), for every mode and count trigger, `late` included."""

from __future__ import annotations

import random
from typing import Any

import pytest

from pipeline_stages._windowing.runtime import config as C
from tests.unit.windowing.pane_runs import (
    KeyedDocs,
    keyed_operator_panes,
    keyed_reference_panes,
)

DIFFERENCE_MS = 3_000

#: `(early count, late count, onlyUpdatedPanes)`; None: no such phase trigger.
TRIGGERS = [
    (1, None, False),
    (2, None, True),
    (None, None, False),
    (None, 1, False),
    (2, 1, False),
    (1, 2, True),
]


def operator_panes(pane: C.PaneSpec, grace_ms: int, docs: KeyedDocs, cuts: list[int]) -> list[Any]:
    """`(start, end, partition, pane, key, n)` per result, in emission order."""
    return keyed_operator_panes("sliding", DIFFERENCE_MS, grace_ms, pane, docs, cuts)


def reference_panes(pane: C.PaneSpec, grace_ms: int, docs: KeyedDocs) -> list[Any]:
    grace = {"size": grace_ms, "unit": "ms"} if grace_ms else 0
    fields = {"timeDifference": {"size": DIFFERENCE_MS, "unit": "ms"}, "grace": grace}
    return keyed_reference_panes("$slidingWindow", fields, pane, docs)


def stream(rng: random.Random) -> tuple[list[int], list[str], list[str]]:
    """`(times, keys, partitions)`: moving event times with disorder (late records too)."""
    n = rng.randint(5, 30)
    event, times = 0, []
    for _ in range(n):
        event += rng.choice([0, 500, 1_000, 2_000, 4_000])
        times.append(10_000 + max(0, event + rng.randint(-5_000, 500)))  # windows after 1970
    return times, rng.choices("ab", k=n), rng.choices("xy", k=n)


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize("seed", range(8))
def test_operator_sliding_panes_are_the_reference_models(
    mode: str, trigger: tuple[int | None, int | None, bool], seed: int
) -> None:
    rng = random.Random(seed)
    docs = stream(rng)
    early, late, only_updated = trigger
    grace_ms = rng.choice([0, 2_000] if late is None else [2_000, 4_000])
    pane = C.PaneSpec(mode=mode, early_count=early, late_count=late, only_updated=only_updated)
    expected = reference_panes(pane, grace_ms, docs)
    n = len(docs[0])
    cuts = sorted(rng.sample(range(1, n), min(3, n - 1)))
    for at in ([], cuts, list(range(1, n))):
        assert operator_panes(pane, grace_ms, docs, at) == expected, f"cuts {at}"
    assert expected, "the stream fires some pane"


def test_the_streams_fire_every_timing() -> None:
    """The random streams exercise what the test is about: EARLY panes of windows a record
    creates and of windows it reaches, ON_TIME, and LATE panes."""
    timings: dict[str, int] = {}
    for seed in range(8):
        docs = stream(random.Random(seed))
        pane = C.PaneSpec(mode="accumulating", early_count=2, late_count=1)
        for *_, meta, _, _ in reference_panes(pane, 4_000, docs):
            timings[meta["timing"]] = timings.get(meta["timing"], 0) + 1
    assert min(timings.get(t, 0) for t in ("EARLY", "ON_TIME", "LATE")) > 5, timings
