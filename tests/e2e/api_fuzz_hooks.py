"""Hooks the API fuzz run loads (`SCHEMATHESIS_HOOKS=tests.e2e.api_fuzz_hooks`).

* A serializer for the ingest route's `application/x-ndjson` body: its schema is a string,
  sent as UTF-8 text (without one the fuzzer skips every case with this media type).
* `positive_data_acceptance_beyond_the_pipeline`, which the run uses in place of the
  built-in `positive_data_acceptance` (excluded on the command line). On every operation it
  IS the built-in check, called as is, with one exception on the two operations whose body
  carries a pipeline (`POST /processors`, `PATCH /processors/{name}`): a 422
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
* `after_call`: one line per request (`METHOD operation status`) appended to the file named
  by `SLUICE_FUZZ_CALLS`, so the test can show what the run did to the service (how many
  requests, how many processors it started on the engine).
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from schemathesis.checks import positive_data_acceptance
from schemathesis.specs.openapi.checks import RejectedPositiveData

#: The operations whose bodies carry a pipeline.
PIPELINE_OPERATIONS = frozenset({"POST /api/v1/processors", "PATCH /api/v1/processors/{name}"})
#: The operations whose bodies name a target that must be of the right kind (state).
TARGET_OPERATIONS = frozenset({"POST /api/v1/processors/{name}/dlq:replay"})


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
        if operation not in PIPELINE_OPERATIONS | TARGET_OPERATIONS:
            raise
        try:
            body = response.json()
        except ValueError:
            body = None
        if operation in TARGET_OPERATIONS:
            if not is_target_state_error(response.status_code, body):
                raise
        elif not is_pipeline_program_error(response.status_code, body):
            raise
    return None


def is_target_state_error(status: int, body: Any) -> bool:
    """A 422 refusing a replay target that is not (or does not read) an HttpIngest connection."""
    if status != 422 or not isinstance(body, dict) or body.get("errorCode") != "INVALID_REQUEST":
        return False
    problems = body.get("problems") or []
    return bool(problems) and all(
        isinstance(p, dict) and p.get("path") == "/target" and p.get("code") == "invalid_target"
        for p in problems
    )
