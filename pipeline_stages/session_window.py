"""`$sessionWindow`: per-partition windows that close after a `gap` without documents.

Supported Atlas fields: `partitionBy` (required; a field path or a single-operator
expression, not a multi-key embedded document), `gap` (required, size > 0), `pipeline`
(required, non-empty), `boundary` (`eventTime` default, or `processingTime`, which forbids
`allowedLateness` and `idleTimeout`), `allowedLateness` (duration or 0, default 3 s, at most
30 min), `idleTimeout` (duration or 0, default disabled; shared with the other windows).
`offset` does not exist for sessions and is rejected as an unknown field. As in Atlas, the
inner pipeline must hold a `$group`: a session window of stateless stages only (`$match`,
`$project`, ...) is refused at `/pipeline` (`invalid_value`).

Two documents of one partition share a session when their timestamps differ by less than
`gap`; the output window is `[first ts, last ts + gap)` (atlas-semantics.md §3.6). The DLQ
operator of a window is that of the first window-aware operator of its inner pipeline, so this
module has no `OPERATOR_NAME`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from pipeline_stages._base import ProblemCode, custom_error, describe
from pipeline_stages._problems import ErrorList
from pipeline_stages._windowing.runtime import config as window_config
from pipeline_stages._windowing.stage_fields import BoundedWindowSpecBase, PositiveDuration

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext, WindowPlan
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$sessionWindow"


@dataclass(frozen=True)
class SessionGeometry:
    """A session window's timing in milliseconds (see `WindowGeometry` for the fields)."""

    gap_ms: int
    allowed_lateness_ms: int
    idle_timeout_ms: int | None


def simple_partition_by(value: Any) -> Any:
    """`partitionBy` must be a field path or a single-operator expression (Atlas's rule)."""
    if isinstance(value, dict) and (len(value) != 1 or not next(iter(value)).startswith("$")):
        raise custom_error(
            ProblemCode.INVALID_VALUE,
            "partitionBy must be a single field path or a simple expression, not an "
            f"embedded document, got {describe(value)}",
        )
    return value


class SessionWindowSpec(BoundedWindowSpecBase):
    """The body of `$sessionWindow`."""

    partition_by: Any = Field(alias="partitionBy")
    gap: PositiveDuration

    _simple_partition = field_validator("partition_by")(simple_partition_by)

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        super()._check_raw(raw, errors)
        stages = raw.get("pipeline")
        if not isinstance(stages, list | tuple) or not stages:
            return  # a missing or empty pipeline has its own error
        if not any(isinstance(stage, Mapping) and "$group" in stage for stage in stages):
            errors.add(
                ("pipeline",),
                ProblemCode.INVALID_VALUE,
                "A $sessionWindow pipeline must contain a $group stage (Atlas refuses a session "
                "window without one)",
                list(stages),
            )

    def geometry(self) -> SessionGeometry:
        """The window's timing in milliseconds."""
        return SessionGeometry(
            gap_ms=self.gap.ms,
            allowed_lateness_ms=self.allowed_lateness_ms(),
            idle_timeout_ms=self.idle_timeout_ms(),
        )


def compile(
    spec: SessionWindowSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> WindowPlan:  # noqa: A001
    """Compile the window into the Spark window operator (`spark.compile`)."""
    from pipeline_stages._windowing.spark.compile import compile_window

    geometry = window_config.SessionGeometry(gap_ms=spec.gap.ms)
    return compile_window(
        spec,
        frame,
        ctx,
        path,
        key=KEY,
        kind="session",
        geometry=geometry,
        partition_by=spec.partition_by,
    )
