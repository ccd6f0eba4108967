"""Request and response bodies (the template ladder: `XCreate`, `XPublic`, `XsPublic`).

Shapes follow the Atlas Admin API (`StreamsProcessor`, `StreamsProcessorWithStats`,
`StreamsConnection`) with Atlas's camelCase names. Pipelines are passed through as parsed
JSON: Python's `json` keeps key order and `10` vs `10.0`, and the store keeps the text, so
both survive end to end (atlas-semantics.md §2). Connection bodies are in
`service.schemas.connections`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
)

from pipeline_stages import REGISTRY
from service.schemas.stats import ProcessorErrorOut, ProcessorStats

#: Processor and connection names: safe in URLs, file names and Spark query names.
NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
DbName = Annotated[
    str, StringConstraints(min_length=1, max_length=63, pattern=r'^[^/\\. "$\x00]+$')
]
CollName = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=r"^[^$\x00]+$")]


#: MongoDB documents nest at most 100 levels; pipelines (BSON documents in Atlas) too.
MAX_NESTING = 100


def nesting_depth(value: Any) -> int:
    """How deeply objects and arrays nest in a JSON value (a scalar is 0); no recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
        else:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
    return deepest


def _shallow_enough(pipeline: list[Any]) -> list[Any]:
    if nesting_depth(pipeline) > MAX_NESTING:
        raise ValueError(f"the pipeline nests deeper than {MAX_NESTING} levels (MongoDB's limit)")
    return pipeline


#: A stage as the OpenAPI document describes it: an object with one key, a stage Sluice runs.
#: Validation stays with `parse_pipeline`, which reports every stage problem with its path
#: (a JSON Schema cannot say which stage bodies and MQL expressions are valid).
StageJson = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "object",
            "minProperties": 1,
            "maxProperties": 1,
            "propertyNames": {"enum": sorted(REGISTRY)},
        }
    ),
]

Pipeline = Annotated[
    list[StageJson],
    Field(min_length=1, description="Atlas pipeline stages."),
    AfterValidator(_shallow_enough),
]


class _Body(BaseModel):
    # Strict: `resumeFromCheckpoint: 0` or `"true"` is not a boolean; the OpenAPI document
    # promises JSON types, so the API takes nothing else.
    model_config = ConfigDict(extra="forbid", populate_by_name=False, strict=True)


class ProblemOut(BaseModel):
    """One problem: a stable code, a JSON-pointer path, a message."""

    code: str
    path: str
    message: str


class ErrorBody(BaseModel):
    """Every error response (Atlas `ApiError` plus the problem list)."""

    error: int = Field(description="The HTTP status code.")
    errorCode: str = Field(description="Stable error identifier, e.g. PROCESSOR_NOT_FOUND.")
    reason: str
    detail: str
    problems: list[ProblemOut] = Field(default_factory=list)
    warnings: list[ProblemOut] = Field(default_factory=list)


# --------------------------------------------------------------------------- processors


class DlqTarget(_Body):
    """`options.dlq`: where DLQ records go (a `local` or `Cluster` connection)."""

    connectionName: Name
    db: DbName
    coll: CollName


class NoDlq(_Body):
    """`{}`: remove the DLQ (`modify({dlq: {}})`)."""


class ProcessorOptions(_Body):
    """Options of a processor."""

    dlq: DlqTarget | None = None


class ModifyOptions(_Body):
    """Options of a modify: a new DLQ (or `{}` to remove it) and `resumeFromCheckpoint`."""

    dlq: DlqTarget | NoDlq | None = None
    resumeFromCheckpoint: bool = True


class ProcessorCreate(_Body):
    """`POST /processors`."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "solar_watts",
                    "pipeline": [
                        {"$source": {"connectionName": "sample_stream_solar"}},
                        {"$match": {"obs.watts": {"$gt": 100}}},
                    ],
                    "options": {"dlq": {"connectionName": "local", "db": "solar", "coll": "dlq"}},
                }
            ]
        }
    )

    name: Name
    pipeline: Pipeline
    options: ProcessorOptions = Field(default_factory=ProcessorOptions)


class PipelineValidate(_Body):
    """`POST /pipelines:validate`: a pipeline (and options) checked as `create` checks them."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"pipeline": [{"$source": {"connectionName": "sample_stream_solar"}}]}]
        }
    )

    # Not `Pipeline`: any array is a body this route answers; what is wrong with its items
    # (an empty array, a stage of the wrong shape) is a pipeline problem, reported with 200.
    pipeline: Annotated[
        list[Any],
        Field(description="Atlas pipeline stages (any JSON: stage problems are reported)."),
        AfterValidator(_shallow_enough),
    ]
    options: ProcessorOptions = Field(default_factory=ProcessorOptions)


def _integral(value: object) -> object:
    """`1.0` as `1`: JSON Schema's `integer` includes it; strict mode would refuse it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class PipelineProcess(_Body):
    """`POST /pipelines:process`: run a pipeline ephemerally and stream its output back."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "pipeline": [
                        {"$source": {"documents": [{"n": 1}, {"n": 2}]}},
                        {"$match": {"n": {"$gt": 1}}},
                    ],
                    "maxSeconds": 30,
                }
            ]
        }
    )

    # No `options`: DLQ records are streamed back with the output, as `sluice process` prints
    # them, not written to a DLQ collection.
    pipeline: Pipeline
    batchSize: Annotated[int | None, BeforeValidator(_integral)] = Field(
        default=None, ge=1, le=1_000_000, description="Documents per micro-batch (`documents`)."
    )
    maxSeconds: float = Field(
        default=600.0, gt=0, le=86_400, description="Stop after this long (Atlas: 10 minutes)."
    )


class PipelineValidation(BaseModel):
    """The answer of `POST /pipelines:validate`: the problems `create` would report."""

    valid: bool
    problems: list[ProblemOut]
    warnings: list[ProblemOut] = Field(default_factory=list)
    compiled: bool = Field(
        description="Whether Spark's compiler checked it too (only when Spark is ready; the "
        "problems found without Spark are always complete: shapes, stages, operators)."
    )


class ProcessorModify(_Body):
    """`PATCH /processors/{name}`: only while the processor is not started (§7.4)."""

    name: Name | None = None
    pipeline: Pipeline | None = None
    options: ModifyOptions = Field(default_factory=ModifyOptions)


class StartRequest(_Body):
    """Optional body of `:start` (Atlas `:startWith`)."""

    resumeFromCheckpoint: bool = True


class ProcessorPublic(BaseModel):
    """`StreamsProcessorWithStats`."""

    model_config = ConfigDict(populate_by_name=True)

    id: str = Field(alias="_id")
    name: str
    pipeline: list[Any]
    options: dict[str, Any]
    state: Literal["CREATED", "STARTED", "STOPPED", "FAILED"]
    error: ProcessorErrorOut | None = None
    stats: ProcessorStats
    createdAt: datetime
    lastStateChange: datetime
    warnings: list[ProblemOut] = Field(
        default_factory=list, description="Lint warnings of the pipeline (create and modify)."
    )
    ephemeral: bool = Field(
        default=False,
        description="A `POST /pipelines:process` run: never stored, gone when its client is.",
    )


class ProcessorsPublic(BaseModel):
    """A page of processors."""

    results: list[ProcessorPublic]
    totalCount: int


class SampleMessages(BaseModel):
    """Recent output documents and DLQ messages (`{_dlqMessage: ...}`), oldest first."""

    messages: list[dict[str, Any]]
    cursorId: str | None = Field(
        default=None, description="Pass as `after` to get only newer messages."
    )


class DlqPage(BaseModel):
    """A page of DLQ documents, by `dlqTime`."""

    results: list[dict[str, Any]]
    totalCount: int


class DlqPurged(BaseModel):
    """How many DLQ documents were deleted."""

    deletedCount: int


# --------------------------------------------------------------------------- ingest, health


class IngestAccepted(BaseModel):
    """`POST /ingest/{connection}`: records appended durably (fsync) to the spool."""

    accepted: int
    invalid: int = Field(
        description="Records processors will send to the DLQ at the source: not a JSON object, "
        "not UTF-8, NaN, duplicate keys, an invalid Extended JSON value, nesting deeper than "
        "1000 levels."
    )
    firstSeq: int | None = None
    lastSeq: int | None = None


class Health(BaseModel):
    """`GET /healthz`."""

    status: Literal["ok"]
    engine: Literal["stopped", "starting", "ready", "failed"]
    version: str
    engineError: str | None = None  # noqa: N815 - JSON field name
