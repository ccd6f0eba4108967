"""`$lookup`: join each document with documents of an Atlas collection.

All documented Atlas fields are parsed: `from` (`{connectionName, db, coll}`, required: in
Atlas the foreign collection is reached through a registry connection, so the plain MongoDB
string form is refused), `localField` and `foreignField` (given together), `let`, `pipeline`
(raw stages, run against the foreign collection), `as` (required output field),
`parallelism` (1–16, default 1) and `partitionBy` (an expression). Either the
`localField`/`foreignField` pair or `pipeline` (or both) must be present.

The foreign collection is queried per micro-batch on the executors, one batched `$in` query
per partition and distinct key set (`_enrichment`). The inner `pipeline` runs on the foreign
collection through what the stores evaluate themselves: `$match` stages (query filters, `$expr`
over `$$` variables of `let`), then optionally `$sort`, `$skip`, `$limit` and an
inclusion/exclusion `$project`, in that order. Any other stage, or another order, is refused
with `unsupported_option` at the stage's path.
"""

from __future__ import annotations

import re
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


def connection_form(value: Any) -> Any:
    """Refuse the plain-string `from` of MongoDB's `$lookup` (a stream reaches a connection)."""
    if isinstance(value, str):
        raise custom_error(
            ProblemCode.INVALID_VALUE,
            "from must be {connectionName, db, coll} in a stream processor "
            f"(the foreign collection is reached through a connection), got {describe(value)}",
        )
    return value


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

    _connection_form = field_validator("from_", mode="before")(connection_form)

    @field_validator("as_")
    @classmethod
    def _output_field(cls, value: str) -> str:
        if problem := field_name_problem(value, dotted=True):
            raise custom_error(ProblemCode.INVALID_VALUE, problem)
        return value

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        if isinstance(raw.get("pipeline"), list):
            inner_pipeline_errors(raw["pipeline"], errors)
        if isinstance(raw.get("let"), dict):
            for name in raw["let"]:
                if not _VARIABLE.fullmatch(str(name)):
                    errors.add(
                        ("let", name),
                        ProblemCode.INVALID_VALUE,
                        f"'{name}' is not a valid variable name: it must start with a "
                        "lowercase letter and contain only letters, digits and '_'",
                        name,
                    )
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


#: The inner stages the stores evaluate, in the order they must come (`$match` may repeat).
INNER_ORDER = ("$match", "$sort", "$skip", "$limit", "$project")
_VARIABLE = re.compile(r"[a-z][A-Za-z0-9_]*")


def inner_pipeline_errors(stages: list[Any], errors: ErrorList) -> None:
    """Record the inner stages the stores cannot evaluate (`unsupported_option` at each)."""
    rank = 0
    for index, stage in enumerate(stages):
        key = next(iter(stage)) if isinstance(stage, dict) and len(stage) == 1 else None
        if key is None:
            errors.add(
                ("pipeline", index),
                ProblemCode.STAGE_SHAPE,
                f"A stage must be an object with exactly one key, got {describe(stage)}",
                stage,
            )
            continue
        if key not in INNER_ORDER:
            errors.add(
                ("pipeline", index, key),
                ProblemCode.UNSUPPORTED_OPTION,
                f"{key} is not supported in a $lookup pipeline: Sluice runs the pipeline in the "
                f"store, which evaluates {', '.join(INNER_ORDER)} (in that order)",
                stage,
            )
            continue
        position = INNER_ORDER.index(key)
        if position < rank or (position == rank and key != "$match" and index > 0):
            errors.add(
                ("pipeline", index, key),
                ProblemCode.UNSUPPORTED_OPTION,
                f"{key} cannot come here in a $lookup pipeline: Sluice evaluates "
                f"{', '.join(INNER_ORDER)} in that order, each at most once ($match repeated)",
                stage,
            )
            continue
        rank = position
        if problem := _inner_body_problem(key, stage[key]):
            errors.add(("pipeline", index, key), ProblemCode.UNSUPPORTED_OPTION, problem, stage)


def _inner_body_problem(key: str, body: Any) -> str | None:
    if key == "$match" and not isinstance(body, dict):
        return f"$match takes a query filter object, got {describe(body)}"
    if key in ("$limit", "$skip") and (
        isinstance(body, bool) or not isinstance(body, int | float) or body < (key == "$limit")
    ):
        return f"{key} takes a {'positive' if key == '$limit' else 'non-negative'} integer"
    if key == "$sort" and (
        not isinstance(body, dict) or not body or any(v not in (1, -1) for v in body.values())
    ):
        return "$sort takes an object of field: 1 or -1 in a $lookup pipeline"
    if key == "$project" and (
        not isinstance(body, dict)
        or not body
        or any(isinstance(v, dict | list | str) for v in body.values())
    ):
        return (
            "$project in a $lookup pipeline takes field inclusions or exclusions only "
            "(computed fields are not evaluated by the stores)"
        )
    return None


def compile(spec: LookupSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Join each healthy document with the foreign documents that match it."""
    from pipeline_stages._enrichment.lookup_compile import compile_lookup

    return compile_lookup(spec, frame, ctx, path, key=KEY, operator=OPERATOR_NAME)
