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


def upgraded_dict(obj: Any, name: str) -> dict[Any, Any]:
    """`obj.<name>`, a dict field added to `obj` when it was pickled before the field existed
    (a restart from an older checkpoint continues with it empty)."""
    found: dict[Any, Any] | None = getattr(obj, name, None)
    if found is None:
        found = {}
        setattr(obj, name, found)
    return found


def pane_updated(state: Any) -> dict[int, set[Any]]:
    """`state.pane_updated`, added to a state pickled before `onlyUpdatedPanes` was fired."""
    return upgraded_dict(state, "pane_updated")


def pane_timers(state: Any) -> dict[int, int]:
    """`state.pane_timers`, added to a state pickled before `every` triggers were fired."""
    return upgraded_dict(state, "pane_timers")


def pane_emitted(state: Any) -> dict[int, dict[Any, list[Emitted]]]:
    """`state.pane_emitted`, added to a state pickled before retractions were fired."""
    return upgraded_dict(state, "pane_emitted")


__all__ = [
    "INDEX",
    "ON_TIME_DONE",
    "SINCE",
    "PaneCounts",
    "pane_counts",
    "pane_emitted",
    "pane_timers",
    "pane_updated",
    "upgraded_dict",
]
