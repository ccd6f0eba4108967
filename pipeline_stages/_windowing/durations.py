"""Durations of the window stages that must be strictly positive (hop size, gap, periods).

Its own module so that both the window specs (`stage_fields`) and the trigger specs
(`triggers`), which `stage_fields` imports, share one copy.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import field_validator

from pipeline_stages._base import Duration, custom_error


class PositiveDuration(Duration):
    """A duration whose size is strictly positive (hop size, gap, time difference)."""

    size: int
    #: What the error message calls the duration (Atlas words the interval's own way).
    subject: ClassVar[str] = "Duration"

    @field_validator("size")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise custom_error(
                "greater_than", f"{cls.subject} size must be greater than 0. Got {value}."
            )
        return value
