"""`$throttle`: limit the rate at which documents reach the stages after it.

Atlas's fields: `messagesPerSec` and `bytesPerSec`, positive integers, at least one of them
("$throttle requires at least one of 'bytesPerSec' or 'messagesPerSec'"). Main pipeline only.

Atlas holds documents back; a Spark micro-batch cannot be held back document by document,
so Sluice throttles where the records are read: a token bucket per limit of every stage
(refilled at its rate, holding one second's worth) caps how many records (and bytes) the next
micro-batch may read, and the source's reader waits until every bucket has capacity before
it plans a micro-batch (`_connectors/sources/rate_limit.py`, `throttled.py`). Nothing is
dropped; the query falls behind its source instead, as in Atlas. `throttledTimeMs` and
`throttleEvents` are reported in the stats.

Since the buckets count the records the source reads, a `$throttle` after a `$match` limits
the records before the filter (slower than Atlas when the filter drops some), and several
`$throttle` stages all apply to the source's records. Refused with `unsupported_option`:
`$throttle` after a window stage (its results are not what the source reads), `bytesPerSec`
on sources that cannot size records before reading them (Kafka, HTTP ingest, change streams,
the sample stream), and a source compiled outside the pipeline.
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


#: Sources whose records `bytesPerSec` can size before they are read (`bytes_between`).
BYTE_SIZED_SOURCES = frozenset({"documents", "File"})
#: Sources Sluice reads with its own readers (`sources.raw_source`), where the bucket lives.
THROTTLED_SOURCES = frozenset({"documents", "Sample", "File", "HttpIngest", "Kafka", "Cluster"})


def compile(spec: ThrottleSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Nothing to add to the plan: `plan.compile_pipeline` handed the rates to the source's
    reader (`sources.throttled`). Refuses what that reader cannot enforce."""
    body = join_path(path, KEY)
    kind = ctx.source_kind
    if kind == "":
        pass  # an unknown connection: `$source` reported it
    elif kind is None or kind not in THROTTLED_SOURCES:
        ctx.problems.error(
            body,
            ProblemCode.UNSUPPORTED_OPTION,
            "$throttle limits the records its source reads, and this source "
            f"({kind or 'compiled outside the pipeline'}) cannot be throttled",
        )
    elif spec.bytes_per_sec is not None and kind not in BYTE_SIZED_SOURCES:
        ctx.problems.error(
            join_path(body, "bytesPerSec"),
            ProblemCode.UNSUPPORTED_OPTION,
            f"bytesPerSec needs the sizes of the records before they are read, which a {kind} "
            "source does not give; use messagesPerSec (bytesPerSec works on File and "
            "documents sources)",
        )
    if ctx.after_window:
        ctx.problems.error(
            body,
            ProblemCode.UNSUPPORTED_OPTION,
            "$throttle after a window stage is not supported: Sluice throttles the records the "
            "source reads, which would not limit the window's results to this rate; put "
            "$throttle before the window",
        )
    return frame
