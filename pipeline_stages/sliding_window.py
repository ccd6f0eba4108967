"""`$slidingWindow`: a Sluice extension, NOT an Atlas stage (Kafka Streams KIP-450 windows).

Atlas has no sliding window. This stage follows Kafka Streams' `SlidingWindows`: every
document defines a window covering the `timeDifference` before it (both ends inclusive), so an
aggregate exists for each distinct set of documents that lie within `timeDifference` of each
other. Fields:

* `timeDifference` (required, size > 0): the window length;
* `grace` (duration or 0, default 3 s like Atlas `allowedLateness`, at most 30 min): how long
  after a window's end a document is still accepted; later documents are late (DLQ);
* `idleTimeout` (duration or 0, default disabled): as for the Atlas windows;
* `partitionBy` (optional; a field path or a single-operator expression, as for
  `$sessionWindow`): windows are kept per partition, as Kafka Streams keeps them per key;
  without it all documents share one partition;
* `pipeline` (required, non-empty): the inner pipeline, with the same rules as Atlas windows.

There is no `boundary` (sliding windows are event-time only) and no `offset` (windows are not
aligned to the epoch); both are rejected as unknown fields. The DLQ operator of a window is
that of the first window-aware operator of its inner pipeline, so this module has no
`OPERATOR_NAME`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from pipeline_stages._windowing.runtime import config as window_config
from pipeline_stages._windowing.stage_fields import (
    THREE_SECONDS,
    ClosingWindowSpecBase,
    Grace,
    PositiveDuration,
    duration_ms,
)
from pipeline_stages.session_window import simple_partition_by

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext, WindowPlan
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$slidingWindow"


@dataclass(frozen=True)
class SlidingGeometry:
    """A sliding window's timing in milliseconds; `grace` is reported as allowed lateness."""

    time_difference_ms: int
    allowed_lateness_ms: int
    idle_timeout_ms: int | None


class SlidingWindowSpec(ClosingWindowSpecBase):
    """The body of the Sluice `$slidingWindow` extension."""

    time_difference: PositiveDuration = Field(alias="timeDifference")
    grace: Grace = THREE_SECONDS
    partition_by: Any = Field(default=None, alias="partitionBy")

    _simple_partition = field_validator("partition_by")(simple_partition_by)

    def allowed_lateness_ms(self) -> int:
        """The grace period in ms (the sliding window's allowed lateness)."""
        return duration_ms(self.grace)

    def geometry(self) -> SlidingGeometry:
        """The window's timing in milliseconds."""
        return SlidingGeometry(
            time_difference_ms=self.time_difference.ms,
            allowed_lateness_ms=self.allowed_lateness_ms(),
            idle_timeout_ms=self.idle_timeout_ms(),
        )


def compile(
    spec: SlidingWindowSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> WindowPlan:  # noqa: A001
    """Compile the window into the Spark window operator (`spark.compile`)."""
    from pipeline_stages._windowing.spark.compile import compile_window

    geometry = window_config.SlidingGeometry(time_difference_ms=spec.time_difference.ms)
    return compile_window(
        spec,
        frame,
        ctx,
        path,
        key=KEY,
        kind="sliding",
        geometry=geometry,
        partition_by=spec.partition_by,
    )
