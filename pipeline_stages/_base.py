"""Shared building blocks of stage specs: the spec base model, durations, problems.

Nothing here touches Spark: specs are pure data validated once (style guide B.2). The Spark
side of a stage lives in its module's `compile` function and in `pipeline_stages._engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: Milliseconds per Atlas duration unit. `day` is a fixed 86,400 s: Atlas has no calendar logic.
UNIT_MS: dict[str, int] = {
    "ms": 1,
    "second": 1_000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
}

DurationUnit = Literal["ms", "second", "minute", "hour", "day"]
OffsetUnit = Literal["ms", "second", "minute", "hour"]


class StageModel(BaseModel):
    """Base of every stage spec: frozen, unknown fields rejected, Atlas camelCase aliases."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        strict=False,
        arbitrary_types_allowed=False,
    )


class Duration(StageModel):
    """An Atlas duration `{size, unit}`; `size` is a whole number of `unit`s."""

    size: int = Field(ge=0)
    unit: DurationUnit

    @field_validator("size", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        # Atlas parses size as an int; 1.5 seconds is an error, 2.0 is accepted as 2.
        if isinstance(value, bool):
            raise ValueError("size must be a whole number, not a boolean")
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueError(f"size must be a whole number, got {value}")
            return int(value)
        return value

    @property
    def ms(self) -> int:
        """The duration in milliseconds."""
        return self.size * UNIT_MS[self.unit]

    def to_timedelta(self) -> timedelta:
        """The duration as a `timedelta`."""
        return timedelta(milliseconds=self.ms)


class Offset(StageModel):
    """A window `offset`: `{offsetFromUtc, unit}` (no `day` unit, as in Atlas)."""

    offset_from_utc: int = Field(alias="offsetFromUtc")
    unit: OffsetUnit

    @property
    def ms(self) -> int:
        """The offset in milliseconds."""
        return self.offset_from_utc * UNIT_MS[self.unit]


class ProblemCode(StrEnum):
    """Stable error codes that are not pydantic's own `type` strings."""

    UNKNOWN_STAGE = "unknown_stage"
    UNSUPPORTED_STAGE = "unsupported_stage"
    UNSUPPORTED_OPTION = "unsupported_option"
    STAGE_SHAPE = "stage_shape"
    MISPLACED_STAGE = "misplaced_stage"
    INVALID_COMBINATION = "invalid_combination"
    UNKNOWN_OPERATOR = "unknown_operator"
    INVALID_ARGUMENTS = "invalid_arguments"
    UNKNOWN_CONNECTION = "unknown_connection"
    INVALID_VALUE = "invalid_value"


@dataclass(frozen=True)
class Problem:
    """One user-facing problem: a stable code, a JSON-pointer path, and a message."""

    code: str
    path: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """The JSON form `{code, path, message}`."""
        return {"code": self.code, "path": self.path, "message": self.message}


class PipelineInvalid(Exception):
    """Raised once, with every problem found, when a pipeline cannot be accepted."""

    def __init__(self, problems: list[Problem], warnings: list[Problem] | None = None) -> None:
        self.problems = problems
        self.warnings = warnings or []
        first = problems[0] if problems else None
        summary = f"{first.path}: {first.message}" if first else "invalid pipeline"
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        super().__init__(summary + more)


def escape_pointer_token(token: str | int) -> str:
    """Escape one JSON-pointer reference token (RFC 6901)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def join_path(base: str, *tokens: str | int) -> str:
    """Append tokens to a JSON-pointer path: `join_path("/pipeline/1", "$match", "a")`."""
    return base + "".join("/" + escape_pointer_token(t) for t in tokens)


@dataclass
class ProblemCollector:
    """Collects problems and warnings in one pass (sqlglot-style), raised once at the end."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def error(self, path: str, code: str, message: str) -> None:
        """Record an error at `path`."""
        self.problems.append(Problem(code=str(code), path=path, message=message))

    def warn(self, path: str, code: str, message: str) -> None:
        """Record a warning at `path`; warnings never make a pipeline invalid."""
        self.warnings.append(Problem(code=str(code), path=path, message=message))

    def extend(self, problems: list[Problem]) -> None:
        """Record several problems."""
        self.problems.extend(problems)

    def raise_if_any(self) -> None:
        """Raise `PipelineInvalid` when any error was recorded."""
        if self.problems:
            raise PipelineInvalid(list(self.problems), list(self.warnings))
