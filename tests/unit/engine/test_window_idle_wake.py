"""The processing-time timeout a window bucket sets while it waits for an idle close.

Before, every micro-batch called every bucket, and an input-less call at processing time `t`
closed what `idle()` found due at `t`. A bucket of a window whose only wall-clock rule is
`idleTimeout` (fixed, session or sliding) now sets a timeout instead, which Spark fires in the first micro-batch whose
time is after it. These tests drive the operator function itself (no Spark) on random streams
and check, for every timeout it sets, that an input-less call 1 ms before the wake-up changes
nothing and one at the wake-up closes a window: the bucket wakes exactly when the old
every-batch calls would first have done something.
"""

from __future__ import annotations

import pickle
import random
from typing import Any

import pandas as pd
import pytest

from pipeline_stages._engine import window_config as C
from pipeline_stages._engine.frame import KIND_OUTPUT
from pipeline_stages._engine.window_operator import make_operator

START_MS = 1_000_000  # processing time of the first call


class FakeState:
    """What the operator uses of PySpark's `GroupState`, recording the timeout it sets."""

    def __init__(self, blob: bytes | None, now_ms: int) -> None:
        self.blob = blob
        self.now_ms = now_ms
        self.timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple[bytes]:
        assert self.blob is not None
        return (self.blob,)

    def update(self, value: tuple[bytes]) -> None:
        self.blob = value[0]

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 - PySpark's name
        return self.now_ms

    def setTimeoutDuration(self, duration_ms: int) -> None:  # noqa: N802 - PySpark's name
        assert duration_ms > 0
        self.timeout_ms = duration_ms


def spec(
    *,
    kind: str = "fixed",
    hop_ms: int = 10_000,
    lateness_ms: int,
    idle_ms: int | None,
    **source: Any,
) -> C.OperatorSpec:
    geometry: Any = {
        "fixed": C.FixedGeometry(interval_ms=10_000, hop_ms=hop_ms, offset_ms=0),
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
        source=C.WindowSource(partitions=1, **source),
        has_dlq=False,
        partitioned=kind != "fixed",
    )


def rows(first_seq: int, event_ms: list[int], keys: list[str]) -> pd.DataFrame:
    n = len(event_ms)
    nothing = [None] * n
    return pd.DataFrame(
        {
            "part": pd.Series([0] * n, dtype="int32"),
            "seq": range(first_seq, first_seq + n),
            "sub": [0] * n,
            C.DOC_SUB: [0] * n,
            "event_ms": event_ms,
            C.FLAG: pd.Series([C.FLAG_OK] * n, dtype="int8"),
            C.ORIG: nothing,
            C.FDOC: nothing,
            C.FMETA: nothing,
            C.REASON: nothing,
            C.OPERATOR: nothing,
            C.KEY: [f'"{k}"' for k in keys],
            C.PKEY: [f'"{k}"' for k in keys],  # sessions and sliding windows partition by it
        }
    )


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
    blob, now, seq, event = None, START_MS, 0, 0
    for _ in range(rng.randint(1, 4)):  # input batches
        n = rng.randint(1, 6)
        times = [event + rng.randint(-4_000, 9_000) for _ in range(n)]
        event = max(event, *times)
        state, _ = call(operator, blob, now, rows(seq, times, rng.choices("abc", k=n)))
        blob, seq, now = state.blob, seq + n, now + rng.randint(100, 3_000)
    timeout = state.timeout_ms
    # The window holding the newest document is still open, so the bucket sleeps until an
    # idle close: every case below checks at least one wake-up.
    assert timeout is not None
    while timeout is not None:
        last_call = state.now_ms
        wake = last_call + timeout + 1  # the first micro-batch time Spark fires it at
        if timeout > 1:  # 1 is the smallest timeout: "as soon as possible"
            before, results = call(operator, blob, wake - 1, None)
            assert results == 0
            assert core_state(before.blob) == core_state(blob)
        state, results = call(operator, blob, wake, None)
        assert results > 0, "the bucket woke up for nothing"
        blob, timeout = state.blob, state.timeout_ms
    # No timeout left: nothing closes without new input, however long the source stays idle.
    _, results = call(operator, blob, state.now_ms + 10**9, None)
    assert results == 0


def test_without_an_idle_timeout_no_timeout_is_set() -> None:
    operator = make_operator(spec(hop_ms=10_000, lateness_ms=0, idle_ms=None))
    state, _ = call(operator, None, START_MS, rows(0, [1_000, 12_000], ["a", "a"]))
    assert state.timeout_ms is None


@pytest.mark.parametrize("source", [{"partition_idle_timeout_ms": 1_000}, {}])
def test_partition_idleness_or_processing_time_is_checked_every_batch(
    source: dict[str, Any],
) -> None:
    s = spec(hop_ms=10_000, lateness_ms=0, idle_ms=None, **source)
    if not source:
        s = C.OperatorSpec(**{**vars(s), "processing_time": True})
    operator = make_operator(s)
    state, _ = call(operator, None, START_MS, rows(0, [1_000], ["a"]))
    assert state.timeout_ms == 1
