"""`$lookup`: join each document with documents of an Atlas collection.

All documented Atlas fields are parsed: `from` (`{connectionName, db, coll}`, required: in
Atlas the foreign collection is reached through a registry connection, so the plain MongoDB
string form is refused), `localField` and `foreignField` (given together), `let`, `pipeline`
(raw stages, run against the foreign collection), `as` (required output field),
`parallelism` (1–16, default 1) and `partitionBy` (an expression). Either the
`localField`/`foreignField` pair or `pipeline` (or both) must be present.

Sluice cannot execute `$lookup` yet: the stage validates here so pipelines get precise errors,
and compilation rejects it with `unsupported_option`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from pipeline_stages._base import (
    ProblemCode,
    StageModel,
    WholeNumber,
    custom_error,
    describe,
    field_name_problem,
    join_path,
)
from pipeline_stages._problems import CheckedSpec, ErrorList, given

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$lookup"
#: [INF] The reference does not name it; MongoDB's stage class is `DocumentSourceLookUp`.
OPERATOR_NAME = "LookUpOperator"


class LookupFrom(StageModel):
    """`$lookup.from`: the foreign collection behind a registry connection."""

    connection_name: str = Field(alias="connectionName")
    db: str
    coll: str


class LookupSpec(CheckedSpec):
    """The body of `$lookup`."""

    from_: LookupFrom = Field(alias="from")
    local_field: str | None = Field(default=None, alias="localField")
    foreign_field: str | None = Field(default=None, alias="foreignField")
    let: dict[str, Any] | None = None
    pipeline: list[dict[str, Any]] | None = None
    as_: str = Field(alias="as")
    parallelism: WholeNumber = Field(default=1, ge=1, le=16)
    partition_by: Any = Field(default=None, alias="partitionBy")

    @field_validator("from_", mode="before")
    @classmethod
    def _connection_form(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise custom_error(
                ProblemCode.INVALID_VALUE,
                "from must be {connectionName, db, coll} in a stream processor "
                f"(the foreign collection is reached through a connection), got {describe(value)}",
            )
        return value

    @field_validator("as_")
    @classmethod
    def _output_field(cls, value: str) -> str:
        if problem := field_name_problem(value, dotted=True):
            raise custom_error(ProblemCode.INVALID_VALUE, problem)
        return value

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        local, foreign = given(raw, "localField"), given(raw, "foreignField")
        if local != foreign:
            present, absent = (
                ("localField", "foreignField") if local else ("foreignField", "localField")
            )
            errors.add(
                (present,),
                ProblemCode.INVALID_COMBINATION,
                f"$lookup with '{present}' also requires '{absent}'",
                raw[present],
            )
        elif not local and not given(raw, "pipeline"):
            errors.add(
                (),
                ProblemCode.INVALID_COMBINATION,
                "$lookup needs either localField and foreignField, or a pipeline",
                dict(raw),
            )


def compile(spec: LookupSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001, ARG001
    """Refused: Sluice parses `$lookup` but cannot execute it yet (never silently ignored)."""
    ctx.problems.error(
        join_path(path, KEY),
        ProblemCode.UNSUPPORTED_OPTION,
        "$lookup is not supported by Sluice yet: lookups against a MongoDB connection are "
        "not implemented",
    )
    return frame
