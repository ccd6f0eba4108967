"""Hooks the API fuzz run loads (`SCHEMATHESIS_HOOKS=tests.e2e.api_fuzz_hooks`).

* A serializer for the ingest route's `application/x-ndjson` body: its schema is a string,
  sent as UTF-8 text (without one the fuzzer skips every case with this media type).
* `positive_data_acceptance_beyond_the_pipeline`, which the run uses in place of the
  built-in `positive_data_acceptance` (excluded on the command line). On every operation it
  IS the built-in check, called as is, with one exception on the operations whose body
  carries a pipeline to run (`POST /processors`, `PATCH /processors/{name}`,
  `POST /pipelines:process`; `:validate` answers 200 with the problems): a 422
  `INVALID_PIPELINE` whose problems all lie inside `/pipeline`, or name the DLQ's
  connection (`/options/dlq/connectionName`), passes. A pipeline is a program (stage order,
  stage bodies, MQL operators and their argument types), and the OpenAPI document can only
  describe its shape (an array of one-key objects naming a stage Sluice runs); and whether
  a name (in a `$source`, a `$merge`, the DLQ) is a connection of the right kind is state,
  which no schema knows. A body can fit the schema and still be a program, or point at a
  connection, the service must refuse. Any other rejection of a schema-valid body (its
  name, the DLQ's db or coll, a 400, a 422 `INVALID_REQUEST`, a problem elsewhere) still
  fails the check.
* The same exception, for the same reason, on `POST /processors/{name}/dlq:replay`: whether
  its `target` names a processor reading an `HttpIngest` connection, or such a connection, is
  state; a 422 `INVALID_REQUEST` whose problems are all `invalid_target` at `/target` passes.
* The same exception on `POST /connections`, for a `Kafka` connection's settings: `config`
  takes any librdkafka client property, and which names and values the client accepts (and
  which need each other) is the client library's table, not something the OpenAPI document
  can list; a 422 `INVALID_REQUEST` whose problems are all the Kafka client's refusals
  (`invalid_value`, at `/config/<key>` or at the connection) passes.
* `use_after_free_beyond_dlq_purge`, which the run uses in place of the built-in
  `use_after_free` (excluded on the command line). It IS the built-in check, with one
  exception: `DELETE /processors/{name}/dlq` purges the messages a filter matches from a
  collection that stays (its answer is `{"deletedCount": n}`), so reading that collection
  again with `GET /processors/{name}/dlq` is a list read, and a 200 there is right. The
  built-in check treats a DELETE with any path parameter as the deletion of one resource;
  it makes the same exception itself for collection DELETEs without one. Reading a deleted
  processor's DLQ (`DELETE /processors/{name}` then `GET .../dlq`) still has to be a 404.
* `after_call`: one line per request (`METHOD operation status`) appended to the file named
  by `SLUICE_FUZZ_CALLS`, so the test can show what the run did to the service (how many
  requests, how many processors it started on the engine).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import schemathesis
from schemathesis.checks import positive_data_acceptance
from schemathesis.specs.openapi.checks import RejectedPositiveData, UseAfterFree, use_after_free

#: The operations whose bodies carry a pipeline.
PIPELINE_OPERATIONS = frozenset(
    {
        "POST /api/v1/processors",
        "PATCH /api/v1/processors/{name}",
        "POST /api/v1/pipelines:process",
    }
)
#: The operations whose bodies name a target that must be of the right kind (state).
TARGET_OPERATIONS = frozenset({"POST /api/v1/processors/{name}/dlq:replay"})
#: The operations whose bodies carry Kafka client settings (the client's own table).
KAFKA_SETTINGS_OPERATIONS = frozenset({"POST /api/v1/connections"})


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: object, value: object) -> bytes:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.encode("utf-8", "surrogatepass")


#: Where a refused program's problems may lie: the pipeline, and the DLQ's connection.
PROGRAM_PATHS = ("/pipeline", "/options/dlq/connectionName")


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    """Record the exchange (see the module docstring)."""
    calls = os.environ.get("SLUICE_FUZZ_CALLS")
    if calls:
        with open(calls, "a", encoding="utf-8") as log:
            log.write(f"{case.method.upper()} {case.path} {response.status_code}\n")


def is_pipeline_program_error(status: int, body: Any) -> bool:
    """A 422 refusing the pipeline as a program, every problem inside `PROGRAM_PATHS`."""
    if status != 422 or not isinstance(body, dict) or body.get("errorCode") != "INVALID_PIPELINE":
        return False
    problems = body.get("problems") or []
    return bool(problems) and all(
        isinstance(p, dict) and str(p.get("path", "")).startswith(PROGRAM_PATHS) for p in problems
    )


@schemathesis.check
def positive_data_acceptance_beyond_the_pipeline(ctx: Any, response: Any, case: Any) -> None:
    """The built-in `positive_data_acceptance` (see the module docstring)."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        operation = f"{case.method.upper()} {case.path}"
        if operation not in PIPELINE_OPERATIONS | TARGET_OPERATIONS | KAFKA_SETTINGS_OPERATIONS:
            raise
        try:
            body = response.json()
        except ValueError:
            body = None
        if operation in KAFKA_SETTINGS_OPERATIONS:
            if not is_kafka_settings_error(response.status_code, body):
                raise
        elif operation in TARGET_OPERATIONS:
            if not is_target_state_error(response.status_code, body):
                raise
        elif not is_pipeline_program_error(response.status_code, body):
            raise
    return None


#: A purge of DLQ messages: `DELETE /api/v1/processors/<name>/dlq`.
DLQ_PURGE = re.compile(r"^DELETE /api/v1/processors/[^/]+/dlq$")


def is_dlq_list_after_purge(free: str, usage: str) -> bool:
    """Whether `usage` reads the DLQ collection that `free` purged messages from."""
    return bool(DLQ_PURGE.match(free)) and usage == "GET " + free.removeprefix("DELETE ")


@schemathesis.check
def use_after_free_beyond_dlq_purge(ctx: Any, response: Any, case: Any) -> bool | None:
    """The built-in `use_after_free` (see the module docstring)."""
    try:
        return use_after_free(ctx, response, case)
    except UseAfterFree as failure:
        if not is_dlq_list_after_purge(failure.free, failure.usage.split("?")[0]):
            raise
    return None


def is_kafka_settings_error(status: int, body: Any) -> bool:
    """A 422 naming only settings the Kafka client refuses (`service.manager.connections`)."""
    if status != 422 or not isinstance(body, dict) or body.get("errorCode") != "INVALID_REQUEST":
        return False
    problems = body.get("problems") or []
    return bool(problems) and all(
        isinstance(p, dict)
        and p.get("code") == "invalid_value"
        and (p.get("path") == "" or str(p.get("path", "")).startswith("/config/"))
        and str(p.get("message", "")).startswith("the Kafka client refuses")
        for p in problems
    )


def is_target_state_error(status: int, body: Any) -> bool:
    """A 422 refusing a replay target that is not (or does not read) an HttpIngest connection."""
    if status != 422 or not isinstance(body, dict) or body.get("errorCode") != "INVALID_REQUEST":
        return False
    problems = body.get("problems") or []
    return bool(problems) and all(
        isinstance(p, dict) and p.get("path") == "/target" and p.get("code") == "invalid_target"
        for p in problems
    )
