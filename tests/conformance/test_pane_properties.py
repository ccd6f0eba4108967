"""Pane properties (issue 25) on random streams, for every registered executor.

They tie the pane rules to Atlas's one result per window:

* batch-size invariance: the same arrival sequence cut into different batches gives the same
  panes (count triggers fire per document, in arrival order);
* the DLQ does not depend on the trigger: panes change what a window emits, never lateness;
* `accumulating` (no `late`): a window's last pane is ON_TIME and equals Atlas's result;
* `discarding`: a window's panes hold its documents exactly once, in arrival order;
* `accumulatingAndRetracting`: every retraction is a copy of the last result of its window and
  group, and what is left unretracted at the end is Atlas's result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conformance.harness import Executor
from tests.conformance.test_properties import SETTINGS, doc, ms, pipeline, run
from tests.conformance.transcript_cases import EXECUTORS

GROUP = [{"$group": {"_id": "$k", "ids": {"$push": "$id"}, "n": {"$count": {}}}}]
MODES = ("accumulating", "discarding", "accumulatingAndRetracting")


@st.composite
def closing_windows(draw: st.DrawFn) -> dict[str, Any]:
    """A random tumbling, hopping or session window body (no trigger yet)."""
    kind = draw(st.sampled_from(["$tumblingWindow", "$hoppingWindow", "$sessionWindow"]))
    body: dict[str, Any] = {"allowedLateness": ms(draw(st.integers(0, 30))), "pipeline": GROUP}
    if kind == "$sessionWindow":
        body |= {"partitionBy": "$k", "gap": ms(draw(st.integers(1, 30)))}
    else:
        body["interval"] = ms(draw(st.integers(1, 60)))
        if kind == "$hoppingWindow":
            body["hopSize"] = ms(draw(st.integers(1, 60)))
    return {kind: body}


def with_trigger(window: dict[str, Any], trigger: dict[str, Any], mode: str) -> dict[str, Any]:
    ((key, body),) = window.items()
    return {key: {**body, "trigger": trigger, "accumulationMode": mode}}


def stream(data: st.DataObject) -> list[list[dict[str, Any]]]:
    offsets = data.draw(st.lists(st.integers(0, 300), min_size=1, max_size=25), label="times")
    steps = [[{**doc(i, t), "k": i % 2}] for i, t in enumerate(offsets)]
    # Far-future documents on both keys close every window that holds an input.
    steps.append([{**doc(-1, 10_000), "k": 0}, {**doc(-2, 10_000), "k": 1}])
    return steps


def window_of(out: dict[str, Any]) -> str:
    window = {k: v for k, v in out["_stream_meta"]["window"].items() if k != "pane"}
    return json.dumps([window, out["_id"]], sort_keys=True)


def pane_of(out: dict[str, Any]) -> dict[str, Any]:
    return out["_stream_meta"]["window"]["pane"]


def atlas_results(emitted: list[dict[str, Any]]) -> dict[str, tuple[Any, Any]]:
    return {window_of(o): (o["ids"], o["n"]) for o in emitted}


@pytest.mark.parametrize("make_executor", EXECUTORS)
@SETTINGS
@given(data=st.data(), window=closing_windows(), mode=st.sampled_from(MODES))
def test_batch_size_invariance_and_dlq(
    make_executor: Callable[[], Executor], data: st.DataObject, window: dict[str, Any], mode: str
) -> None:
    count = data.draw(st.integers(1, 4), label="early count")
    late = data.draw(st.sampled_from([None, 1, 2]), label="late count")
    trigger: dict[str, Any] = {"early": {"count": count}}
    if late is not None:
        trigger["late"] = {"count": late}
    steps = stream(data)
    one_batch = [[d for step in steps[:-1] for d in step], steps[-1]]
    stages = pipeline(with_trigger(window, trigger, mode))
    emitted, dlq = run(make_executor(), stages, steps)
    assert (emitted, dlq) == run(make_executor(), stages, one_batch)
    assert dlq == run(make_executor(), pipeline(window), steps)[1]


@pytest.mark.parametrize("make_executor", EXECUTORS)
@SETTINGS
@given(data=st.data(), window=closing_windows(), mode=st.sampled_from(MODES))
def test_panes_add_up_to_atlas_results(
    make_executor: Callable[[], Executor], data: st.DataObject, window: dict[str, Any], mode: str
) -> None:
    count = data.draw(st.integers(1, 4), label="early count")
    steps = stream(data)
    atlas = atlas_results(run(make_executor(), pipeline(window), steps)[0])
    stages = pipeline(with_trigger(window, {"early": {"count": count}}, mode))
    emitted = run(make_executor(), stages, steps)[0]
    last: dict[str, dict[str, Any]] = {}
    collected: dict[str, list[Any]] = {}
    for out in emitted:
        key, pane = window_of(out), pane_of(out)
        if pane.get("retraction"):
            assert mode == "accumulatingAndRetracting"
            assert {**out, "_stream_meta": None} == {**last.pop(key), "_stream_meta": None}
            continue
        assert key not in last or mode != "accumulatingAndRetracting"
        last[key] = out
        collected.setdefault(key, []).extend(out["ids"])
    # Windows Atlas never closed here (the far-future documents') only have EARLY panes; so
    # have the earlier bounds of a session that grew, unless retracted.
    far = {-1, -2}
    if mode == "discarding":
        # Per group, because a session's panes before it grew carry its earlier bounds.
        assert by_group(collected, far) == by_group({k: ids for k, (ids, _) in atlas.items()}, far)
        return
    assert {k: (o["ids"], o["n"]) for k, o in last.items() if k in atlas} == atlas
    assert all(pane_of(o)["timing"] == "ON_TIME" for k, o in last.items() if k in atlas)
    assert all(pane_of(o)["timing"] == "EARLY" for k, o in last.items() if k not in atlas)
    if mode == "accumulatingAndRetracting":
        assert all(set(o["ids"]) <= far for k, o in last.items() if k not in atlas)


def by_group(ids_of: dict[str, list[Any]], far: set[int]) -> dict[Any, list[Any]]:
    """Every window's ids, pooled per `$group` key (the far-future documents left out)."""
    pooled: dict[Any, list[Any]] = {}
    for key, ids in ids_of.items():
        group = json.loads(key)[1]
        pooled.setdefault(group, []).extend(i for i in ids if i not in far)
    return {g: sorted(ids) for g, ids in pooled.items() if ids}
