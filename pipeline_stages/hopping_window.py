"""`$hoppingWindow`: fixed-size event-time windows whose starts are `hopSize` apart.

Supported Atlas fields: `interval` (required, size > 0), `hopSize` (required, size > 0),
`pipeline` (required, non-empty), `offset` (`{offsetFromUtc, unit}`), `allowedLateness`
(duration or 0, default 3 s, at most 30 min), `idleTimeout` (duration or 0, default
disabled), `boundary` (`eventTime` default, or `processingTime`, which forbids
`allowedLateness` and `idleTimeout`).

`hopSize < interval` gives overlapping windows; `hopSize > interval` gives gaps whose
documents are not processed (atlas-semantics.md §3.6, §4.1). Nothing is rejected beyond the
Atlas rules. The DLQ operator of a window is that of the first window-aware operator of its
inner pipeline, so this module has no `OPERATOR_NAME`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from pipeline_stages._base import Offset
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.stage_fields import (
    BoundedWindowSpecBase,
    FixedWindowTiming,
    IntervalDuration,
    PositiveDuration,
)

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext, WindowPlan
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$hoppingWindow"


class HoppingWindowSpec(BoundedWindowSpecBase):
    """The body of `$hoppingWindow`."""

    interval: IntervalDuration
    hop_size: PositiveDuration = Field(alias="hopSize")
    offset: Offset | None = None

    def geometry(self) -> FixedWindowTiming:
        """The window's grid and timing in milliseconds."""
        return FixedWindowTiming(
            grid=WindowGeometry(
                interval_ms=self.interval.ms,
                hop_ms=self.hop_size.ms,
                offset_ms=self.offset.ms if self.offset else 0,
            ),
            allowed_lateness_ms=self.allowed_lateness_ms(),
            idle_timeout_ms=self.idle_timeout_ms(),
        )


def compile(
    spec: HoppingWindowSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> WindowPlan:  # noqa: A001
    """Compile the window into the Spark window operator (`_windowing.spark.compile`)."""
    from pipeline_stages._windowing.spark.compile import compile_window

    grid = spec.geometry().grid
    return compile_window(spec, frame, ctx, path, key=KEY, kind="fixed", geometry=grid)
