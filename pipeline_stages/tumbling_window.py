"""`$tumblingWindow`: fixed-size, non-overlapping event-time windows.

Supported Atlas fields: `interval` (required, size > 0), `pipeline` (required, non-empty),
`offset` (`{offsetFromUtc, unit}`), `allowedLateness` (duration or 0, default 3 s, at most
30 min), `idleTimeout` (duration or 0, default disabled), `boundary` (`eventTime` default, or
`processingTime`, which forbids `allowedLateness` and `idleTimeout`). Nothing is rejected
beyond the Atlas rules.

A tumbling window is a hopping window whose hop equals its interval (style guide B.3):
`as_hopping()` gives that view, so there is one window code path. The DLQ operator of a window
is that of the first window-aware operator of its inner pipeline, so this module has no
`OPERATOR_NAME`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline_stages._base import Offset
from pipeline_stages._windowing.stage_fields import (
    BoundedWindowSpecBase,
    FixedWindowTiming,
    IntervalDuration,
)
from pipeline_stages.hopping_window import HoppingWindowSpec

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext, WindowPlan
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$tumblingWindow"


class TumblingWindowSpec(BoundedWindowSpecBase):
    """The body of `$tumblingWindow`."""

    interval: IntervalDuration
    offset: Offset | None = None

    def as_hopping(self) -> HoppingWindowSpec:
        """The same window as a `HoppingWindowSpec` with `hopSize == interval`."""
        # Fields are already validated; re-validating would send the inner specs through the
        # Stage union again, which expects raw JSON.
        fields_set = set(self.model_fields_set) | {"hop_size"}
        return HoppingWindowSpec.model_construct(
            _fields_set=fields_set, **dict(self), hop_size=self.interval
        )

    def geometry(self) -> FixedWindowTiming:
        """The window's timing in milliseconds (`hop_ms == interval_ms`)."""
        return self.as_hopping().geometry()


def compile(
    spec: TumblingWindowSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> WindowPlan:  # noqa: A001
    """Compile as a hopping window whose hop is its interval (one window code path)."""
    from pipeline_stages._windowing.spark.compile import compile_window

    grid = spec.geometry().grid
    return compile_window(spec, frame, ctx, path, key=KEY, kind="fixed", geometry=grid)
