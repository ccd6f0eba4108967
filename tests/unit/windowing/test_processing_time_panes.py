"""Panes of processing-time windows (issue 25): documents are placed by their arrival time,
count panes fire per window as for event-time windows, and the ON_TIME pane fires when the
wall clock passes the window's end (the operator's timeout calls the bucket then). The
reference model has no processing-time windows (its clock is the test's), so the expected
panes are written out here."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pandas as pd

from pipeline_stages._stream.frame import KIND_OUTPUT
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.operator import make_operator
from tests.unit.windowing.group_state import FakeState
from tests.unit.windowing.test_idle_wake import rows, spec

START = 1_000_000  # processing time of the first call: a window start (10 s windows)


def calls(pane: C.PaneSpec, steps: list[tuple[int, pd.DataFrame | None]]) -> list[Any]:
    """Per call `(at, input)`: `(timeout set, [(window start, pane, key, n)])`."""
    base = replace(spec(lateness_ms=0, idle_ms=None), processing_time=True)
    operator = make_operator(replace(base, panes=pane))
    blob, out = None, []
    for now, batch in steps:
        state = FakeState(blob, now)
        frame = pd.concat(list(operator((0,), iter([] if batch is None else [batch]), state)))
        blob = state.blob
        results = frame[frame["kind"] == KIND_OUTPUT].sort_values(["seq", "part", "sub"])
        panes = [
            (int(s), json.loads(m)["window"]["pane"], json.loads(d)["_id"], json.loads(d)["n"])
            for s, d, m in zip(
                results["window_start"], results["doc"], results["meta"], strict=True
            )
        ]
        out.append((state.timeout_ms, panes))
    return out


def early(index: int) -> dict[str, Any]:
    return {"index": index, "timing": "EARLY"}


def on_time(index: int) -> dict[str, Any]:
    return {"index": index, "timing": "ON_TIME"}


def test_count_panes_by_arrival_and_the_on_time_pane_on_the_clock() -> None:
    """The documents' event times do not matter: they fall in the window of their arrival."""
    got = calls(
        C.PaneSpec(mode="accumulating", early_count=2),
        [
            (START, rows(0, [5, 6, 7], ["a", "a", "b"])),
            (START + 3_000, rows(3, [5], ["a"])),
            (START + 12_000, rows(4, [99_999], ["a"])),
            (START + 20_001, None),
        ],
    )
    assert got == [
        (10_000, [(START, early(0), "a", 2)]),
        (7_000, [(START, early(1), "a", 3), (START, early(1), "b", 1)]),
        # The clock passed [START, START + 10 s): its ON_TIME pane, then the new window.
        (8_000, [(START, on_time(2), "a", 3), (START, on_time(2), "b", 1)]),
        (None, [(START + 10_000, on_time(0), "a", 1)]),
    ]


def test_every_panes_discarding() -> None:
    got = calls(
        C.PaneSpec(mode="discarding", early_every_ms=4_000),
        [
            (START, rows(0, [1], ["a"])),
            (START + 4_000, None),
            (START + 5_000, rows(1, [1, 1], ["a", "b"])),
            (START + 9_000, None),
            (START + 10_001, None),
        ],
    )
    assert got == [
        (3_999, []),  # the timer, at START + 4 s (Spark calls in the batch after a timeout)
        (6_000, [(START, early(0), "a", 1)]),  # no timer: the window's end + 1 ms
        (3_999, []),
        (1_000, [(START, early(1), "a", 1), (START, early(1), "b", 1)]),
        # Nothing since the last pane: the window closes without an ON_TIME pane.
        (None, []),
    ]
