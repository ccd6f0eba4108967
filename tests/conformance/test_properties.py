"""Window properties checked on random streams, for every registered executor (style G.24).

* batch-size invariance: the same arrival sequence cut into different batches gives identical
  emitted and DLQ output (Sluice decides lateness per document, §4.2 note);
* every in-time document lands in exactly ⌊interval/hop⌋ or ⌈interval/hop⌉ hopping windows,
  and every emitted window is aligned and contains its documents;
* late ∪ counted = all inputs (gap documents of `hop > interval` excepted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import to_datetime_ms, to_epoch_ms
from pipeline_stages._windowing.geometry import WindowGeometry
from tests.conformance.harness import Executor
from tests.conformance.transcript_cases import EXECUTORS

BASE_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
PASS_THROUGH = [{"$addFields": {"w": {"$meta": "stream.window.start"}}}]
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def ms(size: int) -> dict[str, Any]:
    return {"size": size, "unit": "ms"}


def doc(i: int, offset_ms: int) -> dict[str, Any]:
    return {"id": i, "ts": {"$date": {"$numberLong": str(BASE_MS + offset_ms)}}}


def pipeline(window: dict[str, Any], **source: Any) -> list[dict[str, Any]]:
    src = {"connectionName": "k", "topic": "t", "timeField": {"$toDate": "$ts"}, **source}
    return [{"$source": src}, window]


@st.composite
def window_stages(draw: st.DrawFn, inner: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A random window stage of any kind, with small millisecond sizes."""
    inner = inner or [{"$group": {"_id": None, "ids": {"$push": "$id"}, "n": {"$count": {}}}}]
    # A session window's pipeline must hold a $group (Atlas): no pass-through sessions.
    grouped = any("$group" in stage for stage in inner)
    kinds = (
        ["tumbling", "hopping", "session", "sliding"]
        if grouped
        else ["tumbling", "hopping", "sliding"]
    )
    kind = draw(st.sampled_from(kinds))
    lateness = ms(draw(st.integers(0, 30)))
    if kind == "tumbling":
        return {
            "$tumblingWindow": {
                "interval": ms(draw(st.integers(1, 60))),
                "allowedLateness": lateness,
                "pipeline": inner,
            }
        }
    if kind == "hopping":
        return {
            "$hoppingWindow": {
                "interval": ms(draw(st.integers(1, 60))),
                "hopSize": ms(draw(st.integers(1, 60))),
                "allowedLateness": lateness,
                "idleTimeout": ms(draw(st.integers(1, 50))),
                "pipeline": inner,
            }
        }
    if kind == "session":
        return {
            "$sessionWindow": {
                "partitionBy": "$k",
                "gap": ms(draw(st.integers(1, 30))),
                "allowedLateness": lateness,
                "pipeline": inner,
            }
        }
    return {
        "$slidingWindow": {
            "timeDifference": ms(draw(st.integers(1, 30))),
            "grace": lateness,
            "partitionBy": "$k",
            "pipeline": inner,
        }
    }


def strip_volatile(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop the per-record `_id` and `dlqTime`, which are not part of the semantics."""
    return [{k: v for k, v in r.items() if k not in ("_id", "dlqTime")} for r in records]


def run(
    executor: Executor, stages: list[dict[str, Any]], steps: list[Any]
) -> tuple[list[Any], list[Any]]:
    """Feed `steps` (lists of docs = one batch, ints = idle ms) and collect all output."""
    executor.start(stages)
    emitted: list[Any] = []
    dlq: list[Any] = []
    for step in steps:
        if isinstance(step, int):
            executor.idle(step)
        else:
            executor.feed(step)
        e, d = executor.drain()
        emitted += e
        dlq += d
    return emitted, strip_volatile(dlq)


@pytest.mark.parametrize("make_executor", EXECUTORS)
@SETTINGS
@given(data=st.data(), window=window_stages())
def test_batch_size_invariance(
    make_executor: Callable[[], Executor], data: st.DataObject, window: dict[str, Any]
) -> None:
    offsets = data.draw(st.lists(st.integers(0, 400), min_size=1, max_size=25), label="event times")
    docs = [{**doc(i, t), "k": i % 2} for i, t in enumerate(offsets)]
    idle_after = data.draw(st.sets(st.integers(0, len(docs) - 1), max_size=3), label="idle after")
    idle_ms = data.draw(st.integers(1, 80), label="idle ms")

    def batches(cuts: set[int]) -> list[Any]:
        steps: list[Any] = []
        current: list[Any] = []
        for i, d in enumerate(docs):
            current.append(d)
            if i in cuts or i in idle_after or i == len(docs) - 1:
                steps.append(current)
                current = []
                if i in idle_after:
                    steps.append(idle_ms)
        return steps

    one_by_one = batches(set(range(len(docs))))
    other = batches(data.draw(st.sets(st.integers(0, len(docs) - 1)), label="cuts"))
    stages = pipeline(window)
    assert run(make_executor(), stages, one_by_one) == run(make_executor(), stages, other)


def _window_count(g: WindowGeometry, t: int) -> int:
    return len(g.window_starts(t))


@pytest.mark.parametrize("make_executor", EXECUTORS)
@SETTINGS
@given(
    interval=st.integers(1, 50),
    hop=st.integers(1, 50),
    offset=st.integers(-20, 20),
    lateness=st.integers(0, 20),
    offsets=st.lists(st.integers(0, 300), min_size=1, max_size=25),
)
def test_hopping_window_counts_and_alignment(
    make_executor: Callable[[], Executor],
    interval: int,
    hop: int,
    offset: int,
    lateness: int,
    offsets: list[int],
) -> None:
    window = {
        "$hoppingWindow": {
            "interval": ms(interval),
            "hopSize": ms(hop),
            "offset": {"offsetFromUtc": offset, "unit": "ms"},
            "allowedLateness": ms(lateness),
            "pipeline": PASS_THROUGH,
        }
    }
    closing = max(offsets) + interval + hop + lateness + 2
    steps = [[doc(i, t)] for i, t in enumerate(offsets)] + [[doc(-1, closing)]]
    emitted, dlq = run(make_executor(), pipeline(window), steps)
    g = WindowGeometry(interval, hop, offset)
    counted = Counter(e["id"] for e in emitted)
    missed = {d["doc"]["id"]: len(d["missedWindowStartTimes"]) for d in dlq}
    for e in map(from_ejson, emitted):
        start, end = (to_epoch_ms(e["_stream_meta"]["window"][k]) for k in ("start", "end"))
        assert end - start == interval
        assert (end - offset) % hop == 0
        assert start <= to_epoch_ms(e["_ts"]) < end
        assert e["w"] == to_datetime_ms(start)
    for i, t in enumerate(offsets):
        expected = _window_count(g, BASE_MS + t)
        assert counted[i] + missed.get(i, 0) == expected
        if i not in missed and hop <= interval:
            assert counted[i] in (interval // hop, -(-interval // hop))


@pytest.mark.parametrize("make_executor", EXECUTORS)
@SETTINGS
@given(data=st.data(), window=window_stages(inner=PASS_THROUGH))
def test_late_union_counted_is_all_inputs(
    make_executor: Callable[[], Executor], data: st.DataObject, window: dict[str, Any]
) -> None:
    offsets = data.draw(st.lists(st.integers(0, 300), min_size=1, max_size=25), label="event times")
    steps = [[{**doc(i, t), "k": i % 2}] for i, t in enumerate(offsets)]
    # Far-future documents on both keys close every window that holds an input.
    steps.append([{**doc(-1, 10_000), "k": 0}, {**doc(-2, 10_000), "k": 1}])
    emitted, dlq = run(make_executor(), pipeline(window), steps)
    counted = {e["id"] for e in emitted}
    late = {d["doc"]["id"] for d in dlq}
    spec = next(iter(window.values()))
    if "hopSize" in spec:
        g = WindowGeometry(spec["interval"]["size"], spec["hopSize"]["size"])
        expected = {i for i, t in enumerate(offsets) if g.window_starts(BASE_MS + t)}
    else:
        expected = set(range(len(offsets)))
    assert (counted | late) - {-1, -2} == expected
    if "$tumblingWindow" in window:
        assert not counted & late  # only hopping and sliding windows have partially late documents
