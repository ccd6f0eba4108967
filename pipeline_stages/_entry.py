"""A registry entry: what the registry knows of one stage, bound to the stage's spec class.

The registry (`pipeline_stages/__init__`) sits above every stage and every layer that
compiles stages. Those layers (the query plan, a window's inner pipeline) dispatch to a
stage's `compile` through the entry its spec class carries (`entry_of(spec).module`), so
nothing below the registry imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from types import ModuleType

from pipeline_stages._base import StageModel


class Placement(StrEnum):
    """Where a stage may appear (atlas-semantics.md §2)."""

    MAIN = "main"
    WINDOW = "window"
    BOTH = "both"


@dataclass(frozen=True)
class StageEntry:
    """One registered stage: its Atlas key, module, spec class and placement."""

    key: str
    module: ModuleType
    spec: type[StageModel]
    placement: Placement

    @property
    def operator_name(self) -> str | None:
        """The Atlas operator name used in DLQ records (None for window stages)."""
        name = getattr(self.module, "OPERATOR_NAME", None)
        return name if isinstance(name, str) else None

    @property
    def in_main(self) -> bool:
        """Whether the stage may appear in the main pipeline."""
        return self.placement is not Placement.WINDOW

    @property
    def in_window(self) -> bool:
        """Whether the stage may appear in a window's inner pipeline."""
        return self.placement is not Placement.MAIN


_ENTRIES: dict[type[StageModel], StageEntry] = {}


def bind_entry(entry: StageEntry) -> StageEntry:
    """Record `entry` as the entry of its spec class (the registry calls this once per stage)."""
    _ENTRIES[entry.spec] = entry
    return entry


def entry_of(spec: StageModel) -> StageEntry:
    """The registry entry of a parsed spec (`TumblingWindowSpec(...)` → its entry).

    Raises:
        KeyError: the spec's class is not a registered stage.
    """
    return _ENTRIES[type(spec)]


def key_of(spec: StageModel) -> str:
    """The Atlas key of a spec instance (`TumblingWindowSpec(...)` → `"$tumblingWindow"`)."""
    return entry_of(spec).key
