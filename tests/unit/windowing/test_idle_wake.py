"""The processing-time timeout a window bucket sets while it waits for the wall clock.

Before, every micro-batch called every bucket of a window with a wall-clock rule, and an
input-less call at processing time `t` did what was due at `t`. A bucket now sets a timeout
instead, which Spark fires in the first micro-batch whose time is after it: the next idle
close (`idleTimeout`: fixed, session or sliding windows), the end of the first open window
(processing-time windows), the next instant a partition turns idle (`partitionIdleTimeout`).
These tests drive the operator function itself (no Spark) on random streams and check, for
every timeout it sets, that an input-less call 1 ms before the wake-up changes nothing (what
is due only ever grows with time, so nothing earlier would have either), that the wake-up
closes a window where the rule is a window's close, and that once no timeout is left nothing
happens however long the source stays quiet: the bucket wakes exactly when the old
every-batch calls would first have done something.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd
import pytest

from pipeline_stages._stream.frame import KIND_OUTPUT
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.operator import make_operator
from tests.unit.windowing.group_state import FakeState
from tests.unit.windowing.operator_rows import operator_rows

START_MS = 1_000_000  # processing time of the first call


def spec(
    *,
    kind: str = "fixed",
    hop_ms: int = 10_000,
    lateness_ms: int,
    idle_ms: int | None,
    **source: Any,
) -> C.OperatorSpec:
    geometry: Any = {
        "fixed": WindowGeometry(interval_ms=10_000, hop_ms=hop_ms, offset_ms=0),
        "session": C.SessionGeometry(gap_ms=hop_ms),
        "sliding": C.SlidingGeometry(time_difference_ms=hop_ms),
    }[kind]
    count = C.AccumulatorPlan(name="n", op="$count", spec={})
    return C.OperatorSpec(
        kind=kind,
        geometry=geometry,
        allowed_lateness_ms=lateness_ms,
        idle_timeout_ms=idle_ms,
        processing_time=False,
        inner=C.InnerPlan(group=C.GroupPlan(accumulators=(count,)), first_operator="GroupOperator"),
        source=C.WindowSource(**{"partitions": 1, **source}),
        has_dlq=False,
        partitioned=kind != "fixed",
    )


def rows(
    first_seq: int, event_ms: list[int], keys: list[str], parts: list[int] | None = None
) -> pd.DataFrame:
    # Sessions and sliding windows partition by the key too.
    return operator_rows(first_seq, event_ms, keys, parts=parts, partition_keys=True)


def call(
    operator: Any, blob: bytes | None, now_ms: int, batch: pd.DataFrame | None
) -> tuple[FakeState, int]:
    """One call at `now_ms` (input-less without `batch`): the state after it and the number
    of window results it emitted."""
    state = FakeState(blob, now_ms)
    frames = [] if batch is None else [batch]
    out = pd.concat(list(operator((0,), iter(frames), state)))
    return state, int((out["kind"] == KIND_OUTPUT).sum())


def core_state(blob: bytes) -> tuple[Any, dict[str, Any]]:
    """The window state (compared by value: its pickle orders sets arbitrarily) and the
    clock without its `now_ms` (which every call sets)."""
    _, clock, state = pickle.loads(blob)
    return state, {k: v for k, v in vars(clock).items() if k != "now_ms"}


def feed(operator: Any, rng: random.Random, *, partitions: int = 1) -> FakeState:
    """A few input calls with random documents (event times with disorder, keys), processing
    time moving 0.1–3 s between them; the state after the last. With partitions, documents
    come on random ones, and the last call's only on partition 0, ahead of the others: when
    those turn idle, the combined watermark rises."""
    blob, now, seq, event = None, START_MS, 0, 0
    calls = rng.randint(1, 4) + (partitions > 1)
    for index in range(calls):
        n = rng.randint(1, 6)
        times = [event + rng.randint(-4_000, 9_000) for _ in range(n)]
        parts = rng.choices(range(partitions), k=n)
        if partitions > 1 and index == calls - 1:
            times, parts = [event + rng.randint(1_000, 9_000) for _ in range(n)], [0] * n
        event = max(event, *times)
        state, _ = call(operator, blob, now, rows(seq, times, rng.choices("abc", k=n), parts))
        blob, seq, now = state.blob, seq + n, now + rng.randint(100, 3_000)
    return state


def sleep_through(
    operator: Any,
    state: FakeState,
    *,
    same: Callable[[bytes, bytes], bool],
    due: Callable[[bytes, int, int], bool] = lambda _blob, _wake, results: results > 0,
) -> int:
    """Follow the bucket's timeouts with input-less calls until none is left; returns the
    number of wake-ups. 1 ms before each wake-up a call emits nothing and leaves the state
    `same`; at it, something was `due` (default: a window closed). Then a call 10^9 ms later
    does nothing."""
    blob, timeout, wakes = state.blob, state.timeout_ms, 0
    assert blob is not None
    while timeout is not None:
        wake = state.now_ms + timeout + 1  # the first micro-batch time Spark fires it at
        if timeout > 1:  # 1 is the smallest timeout: "as soon as possible"
            before, results = call(operator, blob, wake - 1, None)
            assert results == 0
            assert before.blob is not None and same(before.blob, blob)
        state, results = call(operator, blob, wake, None)
        assert due(blob, wake, results), "the bucket woke up for nothing"
        assert state.blob is not None
        blob, timeout, wakes = state.blob, state.timeout_ms, wakes + 1
    # No timeout left: nothing happens without new input, however long the source is quiet.
    after, results = call(operator, blob, state.now_ms + 10**9, None)
    assert results == 0
    assert after.blob is not None and same(after.blob, blob)
    return wakes


def same_state(one: bytes, other: bytes) -> bool:
    return core_state(one) == core_state(other)


def same_windows(one: bytes, other: bytes) -> bool:
    """Processing-time ticks move the watermark (and a fixed window's lowest open start) to
    `now - 1` even when nothing closes; what may not change is the open windows."""
    first, second = pickle.loads(one)[2], pickle.loads(other)[2]
    content = "windows" if hasattr(first, "windows") else "sessions"
    return getattr(first, content) == getattr(second, content)


@pytest.mark.parametrize("kind", ["fixed", "session", "sliding"])
@pytest.mark.parametrize("seed", range(12))
def test_an_idle_bucket_wakes_when_the_first_window_would_close(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    s = spec(
        kind=kind,
        hop_ms=rng.choice([10_000, 5_000, 3_000]),
        lateness_ms=rng.choice([0, 1_000, 3_000]),
        idle_ms=rng.choice([500, 2_000, 15_000]),
    )
    operator = make_operator(s)
    state = feed(operator, rng)
    # The window holding the newest document is still open, so the bucket sleeps until an
    # idle close: every case checks at least one wake-up.
    assert state.timeout_ms is not None
    assert sleep_through(operator, state, same=same_state) >= 1


@pytest.mark.parametrize("kind", ["fixed", "session"])
@pytest.mark.parametrize("seed", range(8))
def test_processing_time_windows_sleep_until_the_first_one_ends(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    s = spec(kind=kind, hop_ms=rng.choice([10_000, 5_000, 3_000]), lateness_ms=0, idle_ms=None)
    operator = make_operator(replace(s, processing_time=True))
    state = feed(operator, rng)
    # The window the last call's documents went into ends after it: one wake-up at least.
    assert state.timeout_ms is not None and state.timeout_ms > 1
    assert sleep_through(operator, state, same=same_windows) >= 1


@pytest.mark.parametrize("seed", range(12))
def test_partition_idleness_wakes_the_bucket_where_the_watermark_may_rise(seed: int) -> None:
    rng = random.Random(seed)
    s = spec(
        kind=rng.choice(["fixed", "session", "sliding"]),
        hop_ms=rng.choice([10_000, 5_000, 3_000]),
        lateness_ms=rng.choice([0, 1_000, 3_000]),
        idle_ms=rng.choice([None, 2_000, 15_000]),
        partitions=2,
        partition_idle_timeout_ms=rng.choice([500, 2_000, 5_000]),
    )
    operator = make_operator(s)
    state = feed(operator, rng, partitions=2)
    timeout = s.source.partition_idle_timeout_ms
    assert timeout is not None

    def closes_or_a_partition_turns_idle(blob: bytes, wake: int, results: int) -> bool:
        clock = pickle.loads(blob)[1]
        return results > 0 or any(
            clock.now_ms < active + timeout <= wake for active in clock.part_active.values()
        )

    # Each partition turns idle after its last input: the bucket wakes for it at least once.
    assert state.timeout_ms is not None
    wakes = sleep_through(operator, state, same=same_state, due=closes_or_a_partition_turns_idle)
    assert wakes >= 1


def test_without_a_wall_clock_rule_no_timeout_is_set() -> None:
    operator = make_operator(spec(hop_ms=10_000, lateness_ms=0, idle_ms=None))
    state, _ = call(operator, None, START_MS, rows(0, [1_000, 12_000], ["a", "a"]))
    assert state.timeout_ms is None


def test_a_session_with_an_every_trigger_sleeps_until_its_pane_is_due() -> None:
    """Production (no test clock): a session's `every` timer is the bucket's wake-up, and the
    input-less call it asks for fires the EARLY pane; with no timer left it sets none."""
    pane = C.PaneSpec(mode="accumulating", early_every_ms=4_000)
    operator = make_operator(replace(spec(kind="session", lateness_ms=0, idle_ms=None), panes=pane))
    state, results = call(operator, None, START_MS, rows(0, [1_000, 2_000], ["a", "a"]))
    assert (results, state.timeout_ms) == (0, 4_000 - 1)
    state, results = call(operator, state.blob, START_MS + 4_000, None)
    assert (results, state.timeout_ms) == (1, None)
