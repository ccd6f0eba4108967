"""Shared building blocks of stage specs: the spec base model, durations, problems.

Nothing here touches Spark: specs are pure data validated once (style guide B.2). The Spark
side of a stage lives in its module's `compile` function and in `pipeline_stages._engine`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from annotated_types import MinLen
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

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


#: The window stages' keys. The layers below the registry (the engine's plan, the MQL scan)
#: need them without importing it; the registry's `WINDOW_KEYS`, derived from the window
#: specs, must equal this (tests/unit/stages/test_registry.py).
WINDOW_STAGE_KEYS = frozenset(
    {"$tumblingWindow", "$hoppingWindow", "$sessionWindow", "$slidingWindow", "$globalWindow"}
)


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


# --------------------------------------------------------------------------- parsing helpers
# Appended for the stage specs: shared field types and the marker that tells a spec it is being
# built from an Atlas stage body rather than from Python keyword arguments.


class WarningCode(StrEnum):
    """Stable codes of lint warnings (they never make a pipeline invalid)."""

    LATE_DATA_DROPPED = "late_data_dropped"
    WINDOW_MAY_NOT_CLOSE = "window_may_not_close"


def describe(value: Any, *, limit: int = 80) -> str:
    """A short JSON rendering of a received value for error messages; never raises."""
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def custom_error(code: str, message: str) -> PydanticCustomError:
    """A pydantic error with a stable `code` and a ready-made message.

    The message travels in the context, not in the template, so braces in received values can
    never be taken for placeholders (a message that can itself fail is worse than none).
    """
    return PydanticCustomError(code, "{message}", {"message": message})


@dataclass(frozen=True)
class AtlasBody:
    """The raw body of a stage as written in the pipeline (`{"$limit": 5}` → `AtlasBody(5)`)."""

    raw: Any


class BodySpec(StageModel):
    """Base of specs whose Atlas body is not a plain object of fixed fields.

    `$match`, `$project`, `$sort`, `$group`, `$limit`, ... take a scalar or an object with
    user-chosen keys. The registry hands such a body over wrapped in `AtlasBody`, and the spec
    turns it into its own fields in `_fields_from_body`. Keyword construction in Python
    (`LimitSpec(limit=5)`) still works because only `AtlasBody` inputs are translated, so a
    user field that happens to share a spec attribute's name cannot be misread.
    """

    @model_validator(mode="before")
    @classmethod
    def _translate_body(cls, value: Any) -> Any:
        if isinstance(value, AtlasBody):
            return cls._fields_from_body(value.raw)
        return value

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        """Validate the Atlas body and return the spec's fields (by alias)."""
        raise NotImplementedError

    @classmethod
    def from_atlas(cls, raw: Any) -> Self:
        """Build the spec from an Atlas stage body."""
        return cls.model_validate(AtlasBody(raw))


def _whole_number_value(value: Any) -> Any:
    # mongosh sends every number as a double, so 5.0 must be accepted where an int is meant.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise custom_error("int_type", f"Input should be a whole number, got {describe(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise custom_error("int_from_float", f"Input should be a whole number, got {value}")
        return int(value)
    return value


#: An integer that may be written as an integral double (`5.0`), never as a bool or string.
WholeNumber = Annotated[int, BeforeValidator(_whole_number_value)]


def _one_or_many_strings(value: Any) -> Any:
    if isinstance(value, str):
        if not value:
            raise custom_error("string_too_short", 'Input should be a non-empty string, got ""')
        return (value,)
    if isinstance(value, list | tuple):
        return value
    raise custom_error(
        "string_type", f"Input should be a string or an array of strings, got {describe(value)}"
    )


#: `"a"` or `["a", "b"]`, normalised to a non-empty tuple of non-empty strings.
OneOrMoreStrings = Annotated[
    tuple[Annotated[StrictStr, MinLen(1)], ...],
    BeforeValidator(_one_or_many_strings),
    MinLen(1),
]


def field_name_problem(name: str, *, dotted: bool) -> str | None:
    """Why `name` is not a usable output field name (or path, when `dotted`), or None."""
    if not name:
        return "a field name must not be empty"
    if name.startswith("$"):
        return f"field name {describe(name)} must not start with '$'"
    if not dotted and "." in name:
        return f"field name {describe(name)} must not contain '.'"
    if dotted and "" in name.split("."):
        return f"field path {describe(name)} must not contain an empty path segment"
    return None


# --------------------------------------------------------------------------- field paths

#: How a `$project` value acts: a flag, an expression, `$meta`, or a sub-projection.
ProjectionKind = Literal["include", "exclude", "computed", "meta", "nested"]


def classify(value: Any) -> ProjectionKind:
    """How a projection value acts: a flag, a sub-projection or an expression."""
    if isinstance(value, bool | int | float):
        return "include" if value else "exclude"
    if isinstance(value, dict) and value:
        first = next(iter(value))
        if first == "$meta":
            return "meta"
        return "computed" if first.startswith("$") else "nested"
    return "computed"


def path_collisions(paths: list[str]) -> list[tuple[str, str]]:
    """`(path, earlier)` pairs where one path equals or is a dotted prefix of an earlier one."""
    seen: list[str] = []
    found: list[tuple[str, str]] = []
    for path in paths:
        for earlier in seen:
            if path == earlier or path.startswith(earlier + ".") or earlier.startswith(path + "."):
                found.append((path, earlier))
                break
        seen.append(path)
    return found
