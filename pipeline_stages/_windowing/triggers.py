"""`trigger` and `accumulationMode`: Sluice's pane extension of the window stages (issue 25).

Atlas fires one result per window and group, when the window closes. With `trigger`, a window
fires *panes* (the Beam / Apex WindowedOperator model): EARLY panes before the watermark
passes its end (`early`), the ON_TIME pane, and LATE panes for late-but-allowed documents
(`late`). `accumulationMode` says what a pane holds: everything so far (`accumulating`), what
arrived since the previous pane (`discarding`), or everything so far with a retraction of the
previous result first (`accumulatingAndRetracting`).

This module holds the specs and the rules that only need the stage body; the rules that
depend on the window kind live with the window specs (`stage_fields`, `global_window`).
Without `trigger` a window behaves exactly as in Atlas.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import Field, StrictBool, field_validator

from pipeline_stages._base import ProblemCode, custom_error, describe
from pipeline_stages._problems import CheckedSpec, ErrorList
from pipeline_stages._windowing.durations import PositiveDuration

AccumulationMode = Literal["accumulating", "discarding", "accumulatingAndRetracting"]
DEFAULT_MODE: AccumulationMode = "accumulating"

#: Accumulators whose state grows with every document of a group (no bound but the input).
UNBOUNDED_ACCUMULATORS = frozenset({"$push", "$addToSet"})


class Firing(CheckedSpec):
    """`trigger.early` / `trigger.late`: fire after `count` documents or `every` duration."""

    count: int | None = None
    every: PositiveDuration | None = None

    @field_validator("count", mode="before")
    @classmethod
    def _whole_positive(cls, value: Any) -> Any:
        if value is None:
            return value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise custom_error("int_type", f"count must be a whole number, got {describe(value)}")
        if isinstance(value, float) and not value.is_integer():
            raise custom_error("int_from_float", f"count must be a whole number, got {value}")
        if value < 1:
            raise custom_error("greater_than_equal", f"count must be at least 1, got {value}")
        return int(value)

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        given = [key for key in ("count", "every") if key in raw]
        if len(given) != 1:
            got = "both" if given else "neither"
            errors.add(
                (),
                ProblemCode.INVALID_VALUE,
                f"a firing needs exactly one of count or every, got {got}",
                dict(raw),
            )

    @property
    def every_ms(self) -> int | None:
        """The processing-time period in ms (None for a count firing)."""
        return None if self.every is None else self.every.ms


class Trigger(CheckedSpec):
    """`trigger`: when a window fires panes besides (or before) its ON_TIME pane."""

    early: Firing | None = None
    late: Firing | None = None
    only_updated_panes: StrictBool = Field(default=False, alias="onlyUpdatedPanes")

    def firings(self) -> Iterator[tuple[str, Firing]]:
        """`("early" | "late", firing)` for each firing set."""
        for name in ("early", "late"):
            firing = getattr(self, name)
            if firing is not None:
                yield name, firing

    @property
    def uses_clock(self) -> bool:
        """Whether a firing runs on the processing-time clock (`every`)."""
        return any(firing.every is not None for _, firing in self.firings())


def mode_rules(raw: Mapping[str, Any], errors: ErrorList) -> None:
    """`accumulationMode` is only allowed with `trigger` (every window kind)."""
    if "accumulationMode" in raw and raw.get("trigger") is None:
        errors.add(
            ("accumulationMode",),
            ProblemCode.INVALID_COMBINATION,
            "accumulationMode can only be set together with trigger (without a trigger a "
            "window fires one pane, when it closes)",
            raw["accumulationMode"],
        )


def late_rule(raw: Mapping[str, Any], errors: ErrorList, *, why: str) -> None:
    """Refuse `trigger.late` on a window that has no late documents (`why` says which)."""
    trigger = raw.get("trigger")
    if isinstance(trigger, Mapping) and "late" in trigger:
        errors.add(("trigger", "late"), ProblemCode.INVALID_COMBINATION, why, trigger["late"])


def unbounded_state(pipeline: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """`(loc inside the window, message)` for each inner stage that would keep documents
    without bound in a window that never closes (the `$globalWindow` rule)."""
    if not isinstance(pipeline, list) or not pipeline:
        return  # not a pipeline: the field's own validation reports it
    for index, stage in enumerate(pipeline):
        if not isinstance(stage, Mapping) or len(stage) != 1:
            continue
        key, body = next(iter(stage.items()))
        if key in ("$group", "$count"):
            if key == "$group" and isinstance(body, Mapping):
                yield from _unbounded_accumulators(index, body)
            return
        if key == "$sort":
            yield (
                ("pipeline", index),
                "a $sort before any $group keeps every document of a window that never closes",
            )
            return
    yield (
        ("pipeline",),
        "a window pipeline without $group or $count keeps every document of a window that "
        "never closes",
    )


def _unbounded_accumulators(
    index: int, body: Mapping[str, Any]
) -> Iterator[tuple[tuple[str | int, ...], str]]:
    for name, value in body.items():
        if isinstance(value, Mapping) and len(value) == 1:
            op = next(iter(value))
            if op in UNBOUNDED_ACCUMULATORS:
                yield (
                    ("pipeline", index, "$group", name, op),
                    f"{op} keeps every document of its group and the window never closes",
                )


__all__ = [
    "DEFAULT_MODE",
    "AccumulationMode",
    "Firing",
    "Trigger",
    "late_rule",
    "mode_rules",
    "unbounded_state",
]
