"""The pane state of fixed windows kept in `FixedState` (issue 25; `runtime.panes` fires the
panes), and its upgrade from states pickled before a pane feature existed: a restart from an
older checkpoint continues with empty fields."""

from __future__ import annotations

from typing import Any

from pipeline_stages._windowing.runtime.pane_firing import Emitted

#: Per window start: `[index of the next pane, documents since the previous pane, 1 once the
#: ON_TIME pane of the `late` model fired]` (a list, not a dataclass: the state pickles
#: thousands of them per micro-batch).
PaneCounts = list[int]
INDEX, SINCE, ON_TIME_DONE = 0, 1, 2


def pane_counts(state: Any) -> dict[int, PaneCounts]:
    """`state.panes`, added to a state pickled before panes existed (and each window's phase
    flag to counts pickled before `late` panes existed)."""
    counts: dict[int, PaneCounts] | None = getattr(state, "panes", None)
    if counts is None:
        counts = {}
        state.panes = counts
    for entry in counts.values():
        if len(entry) < 3:
            entry.append(0)
    return counts


def pane_updated(state: Any) -> dict[int, set[Any]]:
    """`state.pane_updated`, added to a state pickled before `onlyUpdatedPanes` was fired."""
    updated: dict[int, set[Any]] | None = getattr(state, "pane_updated", None)
    if updated is None:
        updated = {}
        state.pane_updated = updated
    return updated


def pane_timers(state: Any) -> dict[int, int]:
    """`state.pane_timers`, added to a state pickled before `every` triggers were fired."""
    timers: dict[int, int] | None = getattr(state, "pane_timers", None)
    if timers is None:
        timers = {}
        state.pane_timers = timers
    return timers


def pane_emitted(state: Any) -> dict[int, dict[Any, list[Emitted]]]:
    """`state.pane_emitted`, added to a state pickled before retractions were fired."""
    emitted: dict[int, dict[Any, list[Emitted]]] | None = getattr(state, "pane_emitted", None)
    if emitted is None:
        emitted = {}
        state.pane_emitted = emitted
    return emitted


__all__ = [
    "INDEX",
    "ON_TIME_DONE",
    "SINCE",
    "PaneCounts",
    "pane_counts",
    "pane_emitted",
    "pane_timers",
    "pane_updated",
]
