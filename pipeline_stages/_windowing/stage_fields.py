"""Fields and rules shared by the window stages, and their geometry in milliseconds.

Atlas rules implemented here (atlas-semantics.md §3.6, §4.7):

* `interval`, `hopSize`, `gap` (and the Sluice `timeDifference`) have `size > 0`
  ("Window interval size must be greater than 0.");
* `allowedLateness` is a duration or the integer `0`; it defaults to 3 seconds, any other
  integer is refused ("Must specify unit and size for non-zero allowed lateness values") and
  the maximum is 30 minutes ("Maximum allowedLateness is 30 minutes");
* `idleTimeout` is a duration or `0`; absent means disabled;
* `boundary: "processingTime"` forbids `allowedLateness` and `idleTimeout`.

The inner `pipeline` is a tuple of stage specs validated with the registry's `Stage` union.
Which stages may appear there is checked by `parse_pipeline`, which also knows the paths.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, GetPydanticSchema, field_validator
from pydantic_core import core_schema

from pipeline_stages._base import (
    Duration,
    Problem,
    ProblemCode,
    WarningCode,
    custom_error,
    describe,
    join_path,
)
from pipeline_stages._problems import CheckedSpec, ErrorList
from pipeline_stages._windowing.durations import PositiveDuration as PositiveDuration
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.triggers import (
    DEFAULT_MODE,
    AccumulationMode,
    Trigger,
    late_rule,
    mode_rules,
)

if TYPE_CHECKING:
    from pipeline_stages import Stage

MAX_ALLOWED_LATENESS_MS = 30 * 60 * 1000
THREE_SECONDS = Duration(size=3, unit="second")

Boundary = Literal["eventTime", "processingTime"]


class IntervalDuration(PositiveDuration):
    """A window interval: a duration whose size is strictly positive."""

    subject: ClassVar[str] = "Window interval"


def _zero_or_duration(label: str, max_ms: int | None) -> Any:
    """A `GetPydanticSchema` accepting `0` or a `Duration`, without pydantic's union noise."""

    def validate(value: Any, handler: core_schema.ValidatorFunctionWrapHandler) -> Any:
        if isinstance(value, bool):
            raise custom_error(
                "model_type", f"{label} must be a duration or 0, got {describe(value)}"
            )
        if isinstance(value, int | float):
            if value == 0:
                return 0
            raise custom_error(
                ProblemCode.INVALID_VALUE,
                f"Must specify unit and size for non-zero {label} values, got {describe(value)}",
            )
        duration = handler(value)
        if max_ms is not None and duration.ms > max_ms:
            raise custom_error(
                "less_than_equal",
                f"Maximum {label} is 30 minutes, got {duration.size} {duration.unit}",
            )
        return duration

    return GetPydanticSchema(
        lambda _tp, handler: core_schema.no_info_wrap_validator_function(
            validate, handler.generate_schema(Duration)
        )
    )


#: `allowedLateness`: a duration of at most 30 minutes, or `0`.
Lateness = Annotated[
    Duration | Literal[0], _zero_or_duration("allowedLateness", MAX_ALLOWED_LATENESS_MS)
]
#: `idleTimeout`: a duration or `0`.
IdleTimeout = Annotated[Duration | Literal[0], _zero_or_duration("idleTimeout", None)]
#: `grace` of the Sluice `$slidingWindow`: same rules as `allowedLateness`.
Grace = Annotated[Duration | Literal[0], _zero_or_duration("grace", MAX_ALLOWED_LATENESS_MS)]


def duration_ms(value: Duration | Literal[0]) -> int:
    """Milliseconds of a `Duration | 0` field."""
    return 0 if isinstance(value, int) else value.ms


@dataclass(frozen=True)
class FixedWindowTiming:
    """A tumbling or hopping window's timing: its grid, in milliseconds, and when it closes.

    `allowed_lateness_ms` is 0 for processing-time windows (nothing is ever late there).
    `idle_timeout_ms` is None when idle closing is disabled; `0` (Atlas `idleTimeout: 0`)
    means windows close as soon as the source has been idle for their remaining time.
    """

    grid: WindowGeometry
    allowed_lateness_ms: int
    idle_timeout_ms: int | None


class WindowSpecBase(CheckedSpec):
    """Fields every window stage has: the inner pipeline and the pane extension (`trigger`,
    `accumulationMode`: `triggers`)."""

    pipeline: tuple[Stage, ...]
    trigger: Trigger | None = None
    accumulation_mode: AccumulationMode | None = Field(default=None, alias="accumulationMode")

    @field_validator("pipeline", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        # Checked on the raw list: pydantic's min_length counts only the stages that validated.
        if isinstance(value, list | tuple) and not value:
            raise custom_error(
                "too_short", "A window pipeline must have at least one stage, got []"
            )
        return value

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        mode_rules(raw, errors)

    @property
    def accumulation(self) -> AccumulationMode:
        """The accumulation mode (`accumulating` when not set)."""
        return self.accumulation_mode or DEFAULT_MODE

    @property
    def event_time(self) -> bool:
        """Whether windows follow event time (and so can see late data)."""
        return False

    def wall_clock_fields(self) -> list[str]:
        """The fields that make this window act on the wall clock, without input: the window
        operator then needs processing-time timeouts (`runtime.config.OperatorSpec.runs_when_idle`,
        which the source's `partitionIdleTimeout` also sets)."""
        found = [] if self.event_time else ["boundary"]
        if self.trigger is not None and self.trigger.uses_clock:
            found.append("trigger")
        return found

    def warnings(self, *, has_dlq: bool) -> list[tuple[str, tuple[str, ...], str]]:  # noqa: ARG002
        """Lint warnings as `(code, loc inside the stage, message after the stage name)`;
        a window that never closes has no late data and nothing to warn about."""
        return []


class ClosingWindowSpecBase(WindowSpecBase):
    """Windows that close (every kind but `$globalWindow`): they have an idle timeout."""

    idle_timeout: IdleTimeout | None = Field(default=None, alias="idleTimeout")

    def idle_timeout_ms(self) -> int | None:
        """The idle timeout in ms, or None when disabled."""
        return None if self.idle_timeout is None else duration_ms(self.idle_timeout)

    @property
    def event_time(self) -> bool:
        """Whether windows follow event time (and so can see late data)."""
        return getattr(self, "boundary", "eventTime") == "eventTime"

    def wall_clock_fields(self) -> list[str]:
        """`WindowSpecBase.wall_clock_fields`, `idleTimeout` included."""
        idle = [] if self.idle_timeout is None else ["idleTimeout"]
        return [*super().wall_clock_fields(), *idle]

    def warnings(self, *, has_dlq: bool) -> list[tuple[str, tuple[str, ...], str]]:
        """Lint warnings as `(code, loc inside the stage, message after the stage name)`."""
        found: list[tuple[str, tuple[str, ...], str]] = []
        if self.event_time and not has_dlq:
            found.append(
                (
                    WarningCode.LATE_DATA_DROPPED.value,
                    (),
                    "can receive late documents but the processor has no DLQ: late records will "
                    "be dropped. Set options.dlq to keep them.",
                )
            )
        if self.event_time and self.idle_timeout is None:
            found.append(
                (
                    WarningCode.WINDOW_MAY_NOT_CLOSE.value,
                    ("idleTimeout",),
                    "has boundary eventTime and no idleTimeout: the last window only closes when "
                    "newer data arrives. Set idleTimeout to close it when the source goes quiet.",
                )
            )
        return found


class BoundedWindowSpecBase(ClosingWindowSpecBase):
    """Window stages with a `boundary` and `allowedLateness` (tumbling, hopping, session)."""

    boundary: Boundary = "eventTime"
    allowed_lateness: Lateness = Field(default=THREE_SECONDS, alias="allowedLateness")

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        super()._check_raw(raw, errors)
        if raw.get("boundary") != "processingTime":
            return
        late_rule(
            raw,
            errors,
            why='trigger.late cannot be set when boundary is "processingTime" (processing-time '
            "windows have no late documents)",
        )
        for alias in ("allowedLateness", "idleTimeout"):
            if alias in raw:
                errors.add(
                    (alias,),
                    ProblemCode.INVALID_COMBINATION,
                    f'{alias} cannot be set when boundary is "processingTime" '
                    "(processing-time windows have no late data and close by the clock)",
                    raw[alias],
                )

    def allowed_lateness_ms(self) -> int:
        """The allowed lateness in ms; 0 for processing-time windows."""
        return 0 if self.boundary == "processingTime" else duration_ms(self.allowed_lateness)


#: Window-aware stages that block (hold documents until the window closes).
BLOCKING_KEYS = frozenset({"$group", "$sort", "$count"})


def inner_pipeline_problems(
    keys: list[str | None], path: str, *, allowed: frozenset[str]
) -> Iterator[Problem]:
    """Placement problems of a window's inner pipeline (`keys`: known stage names or None).

    Main-only stages are refused, and `$limit` may not come before the first blocking stage
    (Atlas requires the first window-aware stage to be `$group` or `$sort`).
    """
    seen_blocking = False
    for index, key in enumerate(keys):
        if key is None:
            continue
        if key not in allowed:
            message = f"{key} stage is not permitted in the inner pipeline of a window stage"
            yield Problem(ProblemCode.MISPLACED_STAGE.value, join_path(path, index), message)
        elif key == "$limit" and not seen_blocking:
            message = (
                "$limit must come after a $group or $sort stage: the first window-aware stage "
                "of a window pipeline must be blocking"
            )
            yield Problem(ProblemCode.MISPLACED_STAGE.value, join_path(path, index), message)
        seen_blocking = seen_blocking or key in BLOCKING_KEYS
