"""`$https`: send an HTTP request per document to an `Https` connection.

Atlas's fields: `connectionName` (required), `path` (a string or an expression evaluating to
one, appended to the connection's `url`), `parameters` (query parameters: string keys,
values that are or evaluate to numbers, strings or booleans), `method` (`GET` default,
`POST`, `PUT`, `PATCH`, `DELETE`), `headers` (string keys; values are or evaluate to
strings), `as` (the field the response is written to), `onError` (`dlq` default, `ignore`,
`fail`; any case), `payload` (an inner pipeline shaping the request body from the document:
`$project`, `$addFields`/`$set`, `$unset`, `$replaceRoot`/`$replaceWith`) and `config`
(`connectionTimeoutSec`, `requestTimeoutSec`, `parseJsonStrings`). Where Atlas is silent,
Sluice adds `config.maxRetries` (default 3) and `config.retryBackoffMs` (default 200): a 5xx,
a 429 or a timeout is retried with exponential backoff before `onError` applies.

In the middle of a pipeline the stage enriches each document with the response (in `as`); as
the last stage it is the sink (`_connectors/sinks/https_writer.py`), one request per output
with the output's deterministic id in an `Idempotency-Key` header. Requests run on the
executors, concurrently per partition and bounded (`_enrichment.http`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, StrictBool, field_validator

from pipeline_stages._base import (
    ProblemCode,
    StageModel,
    WholeNumber,
    custom_error,
    describe,
    field_name_problem,
)
from pipeline_stages._problems import CheckedSpec, ErrorList

if TYPE_CHECKING:
    from pipeline_stages import Stage
    from pipeline_stages._connectors.sinks.https_writer import HttpsSinkPlan
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$https"
#: [INF] The reference does not name it in DLQ examples.
OPERATOR_NAME = "HttpsOperator"

Method = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
OnError = Literal["dlq", "ignore", "fail"]
#: The stages a `payload` pipeline may hold: they reshape one document.
PAYLOAD_STAGES = frozenset(
    {"$project", "$addFields", "$set", "$unset", "$replaceRoot", "$replaceWith"}
)


class HttpsConfig(StageModel):
    """`$https.config`: timeouts, JSON-string parsing and (Sluice) retries."""

    connection_timeout_sec: WholeNumber = Field(default=10, alias="connectionTimeoutSec", gt=0)
    request_timeout_sec: WholeNumber = Field(default=30, alias="requestTimeoutSec", gt=0)
    parse_json_strings: StrictBool = Field(default=False, alias="parseJsonStrings")
    max_retries: WholeNumber = Field(default=3, alias="maxRetries", ge=0, le=10)
    retry_backoff_ms: WholeNumber = Field(default=200, alias="retryBackoffMs", ge=0)


def _upper_method(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _lower_on_error(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


class HttpsSpec(CheckedSpec):
    """The body of `$https`."""

    connection_name: str = Field(alias="connectionName", min_length=1)
    path: Any = None
    parameters: dict[str, Any] | None = None
    method: Method = "GET"
    headers: dict[str, Any] | None = None
    as_: str | None = Field(default=None, alias="as")
    on_error: OnError = Field(default="dlq", alias="onError")
    payload: tuple[Stage, ...] | None = None
    config: HttpsConfig = HttpsConfig()

    _method = field_validator("method", mode="before")(_upper_method)
    _on_error = field_validator("on_error", mode="before")(_lower_on_error)

    @field_validator("path", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        if value is None or isinstance(value, str) or (isinstance(value, dict) and value):
            return value
        raise custom_error(
            ProblemCode.INVALID_VALUE,
            f"path must be a string or an expression, got {describe(value)}",
        )

    @field_validator("as_")
    @classmethod
    def _output_field(cls, value: str | None) -> str | None:
        if value is not None and (problem := field_name_problem(value, dotted=True)):
            raise custom_error(ProblemCode.INVALID_VALUE, problem)
        return value

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        payload = raw.get("payload")
        if not isinstance(payload, list):
            return
        for index, stage in enumerate(payload):
            key = next(iter(stage)) if isinstance(stage, dict) and len(stage) == 1 else None
            if key is not None and key not in PAYLOAD_STAGES:
                errors.add(
                    ("payload", index, key),
                    ProblemCode.UNSUPPORTED_OPTION,
                    f"{key} is not supported in a $https payload pipeline, which reshapes one "
                    f"document: use {', '.join(sorted(PAYLOAD_STAGES))}",
                    stage,
                )


def compile(spec: HttpsSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Send a request per healthy document and write the response into `as`."""
    from pipeline_stages._enrichment.https_compile import compile_https

    return compile_https(spec, frame, ctx, path, key=KEY, operator=OPERATOR_NAME)


def compile_sink(spec: HttpsSpec, ctx: CompileContext, path: str) -> HttpsSinkPlan | None:
    """`$https` as the last stage: the sink plan (`sinks.https_writer`); the runner builds its
    writer, which sends one request per output with an `Idempotency-Key`."""
    from pipeline_stages._connectors.sinks.https_writer import plan_https

    return plan_https(spec, connection_of=ctx.connection, path=path, problems=ctx.problems)
