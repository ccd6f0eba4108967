"""`every` panes (processing-time triggers) of tumbling, hopping and session windows against
the reference model (issue 25): random streams (disorder, late documents, two keys) arrive in
random arrival batches separated by random stretches of processing time; the operator
function (no Spark; the state pickled between calls, as a restart from the checkpoint does)
is called on each arrival batch and once after each stretch, as its timeout would call it,
and must emit the panes `tests/conformance/reference_model.py` emits, step by step, for
`early.every`, `late.every` and their mixes with count triggers, in every accumulation mode.
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
from tests.conformance.reference_model import ReferenceExecutor
from tests.unit.windowing.group_state import FakeState
from tests.unit.windowing.test_idle_wake import rows, spec

SIZE_MS = 10_000
#: The operator's processing clock at the reference model's 0.
CLOCK_BASE_MS = 1_000_000

#: `(early, late)`: a count (int), an `every` in ms (`"<n>ms"`), or None.
TRIGGERS: list[tuple[int | str | None, int | str | None]] = [
    ("1000ms", None),
    ("3000ms", None),
    (None, "2000ms"),
    ("1500ms", "1500ms"),
    (2, "2500ms"),
    ("2000ms", 1),
]

Step = tuple[str, Any]  # ("input", [(event ms, key), ...]) or ("idle", ms)


def schedule(rng: random.Random) -> list[Step]:
    steps: list[Step] = []
    event = 0
    for _ in range(rng.randint(3, 12)):
        batch = []
        for _ in range(rng.randint(1, 4)):
            event += rng.randint(0, 3_000)
            batch.append((max(0, event + rng.randint(-6_000, 1_000)), rng.choice("ab")))
        steps.append(("input", batch))
        steps.append(("idle", rng.choice([200, 700, 1_000, 1_500, 2_500, 4_000])))
    return steps


def firing(value: int | str | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, int):
        return {"count": value}
    return {"every": {"size": int(value.removesuffix("ms")), "unit": "ms"}}


def pane_spec(mode: str, early: int | str | None, late: int | str | None, only: bool) -> Any:
    def every(value: int | str | None) -> int | None:
        return int(value.removesuffix("ms")) if isinstance(value, str) else None

    def count(value: int | str | None) -> int | None:
        return value if isinstance(value, int) else None

    return C.PaneSpec(
        mode=mode,
        early_count=count(early),
        late_count=count(late),
        only_updated=only,
        early_every_ms=every(early),
        late_every_ms=every(late),
    )


def operator_steps(op_spec: C.OperatorSpec, steps: list[Step]) -> list[list[Any]]:
    """Per step, `(window start, pane, key, n)` of what the operator emits."""
    operator = make_operator(op_spec)
    blob: bytes | None = None
    now, seq, out = CLOCK_BASE_MS, 0, []
    for kind, value in steps:
        if kind == "idle":
            now += value
            batches: list[pd.DataFrame] = []
        else:
            times, keys = [t for t, _ in value], [k for _, k in value]
            batches = [rows(seq, times, keys)]
            seq += len(value)
        state = FakeState(blob, now)
        frame = pd.concat(list(operator((0,), iter(batches), state)))
        blob = state.blob
        results = frame[frame["kind"] == KIND_OUTPUT].sort_values(["seq", "part", "sub"])
        out.append(
            [
                (int(start), json.loads(meta)["window"]["pane"], doc["_id"], doc["n"])
                for start, doc, meta in zip(
                    results["window_start"],
                    map(json.loads, results["doc"]),
                    results["meta"],
                    strict=True,
                )
            ]
        )
    return out


def reference_steps(
    window: dict[str, Any], steps: list[Step], stage: str = "$hoppingWindow"
) -> list[list[Any]]:
    """Per step, the same tuples from the reference model."""
    executor = ReferenceExecutor()
    executor.start([{"$source": {"timeField": "$t"}}, {stage: window}])
    out = []
    for kind, value in steps:
        if kind == "idle":
            executor.idle(value)
        else:
            executor.feed([{"t": {"$date": {"$numberLong": str(t)}}, "k": k} for t, k in value])
        emitted, _ = executor.drain()
        out.append(
            [
                (
                    _ms(d["_stream_meta"]["window"]["start"]["$date"]),
                    d["_stream_meta"]["window"]["pane"],
                    d["_id"],
                    d["n"],
                )
                for d in emitted
            ]
        )
    return out


def assert_same_steps(
    steps: list[Step], got: list[list[Any]], expected: list[list[Any]], early: int | str | None
) -> None:
    """The operator emitted the reference's panes at every step, and the stream is one that
    tests something (some pane; with `early.every`, some pane on the clock alone)."""
    for n, (step, mine, theirs) in enumerate(zip(steps, got, expected, strict=True)):
        assert mine == theirs, f"step {n} {step}: operator {mine} reference {theirs}"
    assert any(expected), "the stream fires some pane"
    if isinstance(early, str):
        assert any(panes for step, panes in zip(steps, expected, strict=True) if step[0] == "idle")


def _ms(date: str) -> int:
    return round(datetime.fromisoformat(date).timestamp() * 1000)


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize("seed", range(6))
def test_every_panes_are_the_reference_models(
    mode: str, trigger: tuple[int | str | None, int | str | None], seed: int
) -> None:
    rng = random.Random(seed)
    early, late = trigger
    only_updated = rng.random() < 0.5
    hop_ms = rng.choice([SIZE_MS, 5_000])
    lateness_ms = rng.choice([2_000, 5_000]) if late is not None else rng.choice([0, 2_000])
    steps = schedule(rng)
    window = {
        "interval": {"size": SIZE_MS, "unit": "ms"},
        "hopSize": {"size": hop_ms, "unit": "ms"},
        "allowedLateness": {"size": lateness_ms, "unit": "ms"} if lateness_ms else 0,
        "trigger": {
            "onlyUpdatedPanes": only_updated,
            **{k: v for k, v in (("early", firing(early)), ("late", firing(late))) if v},
        },
        "accumulationMode": mode,
        "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
    }
    expected = reference_steps(window, steps)
    base = spec(lateness_ms=lateness_ms, idle_ms=None)
    geometry = WindowGeometry(interval_ms=SIZE_MS, hop_ms=hop_ms, offset_ms=0)
    op_spec = replace(base, geometry=geometry, panes=pane_spec(mode, early, late, only_updated))
    assert_same_steps(steps, operator_steps(op_spec, steps), expected, early)


def session_schedule(rng: random.Random) -> list[Step]:
    """Like `schedule`, and now and then a document at an earlier time of its key (inside a
    session's bounds: after the session's ON_TIME pane, it counts for `late`)."""
    steps: list[Step] = []
    event, seen = 0, []
    for _ in range(rng.randint(3, 12)):
        batch = []
        for _ in range(rng.randint(1, 4)):
            key = rng.choice("ab")
            earlier = [t for t, k in seen if k == key]
            if earlier and rng.random() < 0.3:
                t = rng.choice(earlier)
            else:
                event += rng.randint(0, 3_000)
                t = max(0, event + rng.randint(-6_000, 1_000))
            batch.append((t, key))
            seen.append((t, key))
        steps.append(("input", batch))
        steps.append(("idle", rng.choice([200, 700, 1_000, 1_500, 2_500, 4_000])))
    return steps


#: Per keyed window kind: its stage, its size field, its lateness field, and the event time
#: added to the schedule's (a sliding window starts `timeDifference` before its first record:
#: keep its windows after 1970).
KEYED = {
    "session": ("$sessionWindow", "gap", "allowedLateness", 0),
    "sliding": ("$slidingWindow", "timeDifference", "grace", 10_000),
}


@pytest.mark.parametrize("mode", ["accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", TRIGGERS)
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("kind", list(KEYED))
def test_keyed_every_panes_are_the_reference_models(
    kind: str, mode: str, trigger: tuple[int | str | None, int | str | None], seed: int
) -> None:
    """Session and sliding windows partitioned and grouped by the key: their `every` timers
    (armed by the first document since a pane; a session's carried to the window that absorbs
    it when sessions merge; a sliding window's armed when a record creates it, since it holds
    records then) fire on the clock alone as the reference model's do."""
    stage, size_field, lateness_field, shift = KEYED[kind]
    rng = random.Random(seed)
    early, late = trigger
    only_updated = rng.random() < 0.5
    size_ms = rng.choice([2_000, 4_000])
    lateness_ms = rng.choice([3_000, 6_000]) if late is not None else rng.choice([0, 2_000])
    steps = [
        (step, [(t + shift, k) for t, k in value] if step == "input" else value)
        for step, value in session_schedule(rng)
    ]
    window = {
        "partitionBy": "$k",
        size_field: {"size": size_ms, "unit": "ms"},
        lateness_field: {"size": lateness_ms, "unit": "ms"} if lateness_ms else 0,
        "trigger": {
            "onlyUpdatedPanes": only_updated,
            **{k: v for k, v in (("early", firing(early)), ("late", firing(late))) if v},
        },
        "accumulationMode": mode,
        "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
    }
    expected = reference_steps(window, steps, stage)
    base = spec(kind=kind, hop_ms=size_ms, lateness_ms=lateness_ms, idle_ms=None)
    op_spec = replace(base, panes=pane_spec(mode, early, late, only_updated))
    assert_same_steps(steps, operator_steps(op_spec, steps), expected, early)
