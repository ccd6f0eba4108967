"""`$cachedLookup`: `$lookup` by equality whose query results are cached per executor.

Atlas's fields: `ttl` (`{size, unit}`, required, size > 0), `maxMemUsageBytes` (required,
> 0), `from` (`{connectionName, db, coll}`), `localField`, `foreignField` and `as` (all
required). Atlas does not support `let` or `pipeline` here; they are refused with
`unsupported_option` (not as unknown fields) so the message says why.

Each executor keeps one cache per stage: an entry per distinct local key, expiring after
`ttl`, and the cache evicts expired entries first, then the oldest, until it fits in
`maxMemUsageBytes` (`_enrichment.cache`). Misses are fetched with the same batched `$in` query
as `$lookup` (`_enrichment.lookup_runner`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from pydantic import Field, field_validator

from pipeline_stages._base import ProblemCode, WholeNumber, custom_error, field_name_problem
from pipeline_stages._problems import CheckedSpec
from pipeline_stages._windowing.stage_fields import PositiveDuration
from pipeline_stages.lookup import LookupFrom, connection_form

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$cachedLookup"
#: [INF] Atlas does not name it in the reference; same family as `LookUpOperator`.
OPERATOR_NAME = "CachedLookUpOperator"


class CachedLookupSpec(CheckedSpec):
    """The body of `$cachedLookup`."""

    UNSUPPORTED_OPTIONS: ClassVar[dict[str, str]] = {
        "let": "$cachedLookup does not support let (as in Atlas); use $lookup",
        "pipeline": "$cachedLookup does not support pipeline (as in Atlas); use $lookup",
    }

    ttl: PositiveDuration
    max_mem_usage_bytes: WholeNumber = Field(alias="maxMemUsageBytes", gt=0)
    from_: LookupFrom = Field(alias="from")
    local_field: str = Field(alias="localField", min_length=1)
    foreign_field: str = Field(alias="foreignField", min_length=1)
    as_: str = Field(alias="as")

    _connection_form = field_validator("from_", mode="before")(connection_form)

    @field_validator("as_")
    @classmethod
    def _output_field(cls, value: str) -> str:
        if problem := field_name_problem(value, dotted=True):
            raise custom_error(ProblemCode.INVALID_VALUE, problem)
        return value


def compile(  # noqa: A001
    spec: CachedLookupSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> StreamFrame:
    """Join each healthy document with the cached matches of its `localField`."""
    from pipeline_stages._enrichment.lookup_compile import compile_lookup

    return compile_lookup(spec, frame, ctx, path, key=KEY, operator=OPERATOR_NAME)
