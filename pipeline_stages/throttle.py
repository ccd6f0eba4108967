"""`$throttle`: limit the rate at which documents reach the stages after it.

Atlas's fields: `messagesPerSec` and `bytesPerSec`, positive integers, at least one of them
("$throttle requires at least one of 'bytesPerSec' or 'messagesPerSec'"). Main pipeline only.

Atlas holds documents back; a Spark micro-batch cannot be held back document by document,
so Sluice throttles where the records are read: a token bucket per stage (refilled at each
configured rate) caps how many records the next micro-batch may read, and the engine waits
until the bucket has capacity before it starts a micro-batch. Nothing is dropped; the query
falls behind its source instead, as in Atlas. `throttledTimeMs` and `throttleEvents` are
reported in the stats.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field

from pipeline_stages._base import ProblemCode, WholeNumber, join_path
from pipeline_stages._problems import CheckedSpec, ErrorList, given

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$throttle"
OPERATOR_NAME = "ThrottleOperator"


class ThrottleSpec(CheckedSpec):
    """The body of `$throttle`."""

    messages_per_sec: WholeNumber | None = Field(default=None, alias="messagesPerSec", gt=0)
    bytes_per_sec: WholeNumber | None = Field(default=None, alias="bytesPerSec", gt=0)

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        if not given(raw, "messagesPerSec") and not given(raw, "bytesPerSec"):
            errors.add(
                (),
                ProblemCode.INVALID_COMBINATION,
                "$throttle requires at least one of 'bytesPerSec' or 'messagesPerSec'",
                dict(raw),
            )


def compile(spec: ThrottleSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001, ARG001
    """Refused for now: the source-side token bucket is not wired in yet (never ignored)."""
    ctx.problems.error(
        join_path(path, KEY),
        ProblemCode.UNSUPPORTED_OPTION,
        "$throttle is parsed but not enforced by Sluice yet: the source-side rate limit is "
        "not implemented",
    )
    return frame
