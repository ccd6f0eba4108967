"""The service's one exception hierarchy, and the handlers that turn it into HTTP responses.

Every error leaves the service as `ErrorBody`:
`{error: <HTTP status>, errorCode: "<STABLE_CODE>", reason, detail, problems: [{code, path,
message}], warnings: [...]}` (Atlas's `ApiError` plus Sluice's problem list)::

    SluiceError
    ├── RequestInvalid              422  INVALID_REQUEST      body/query/path validation
    │   ├── PipelineRejected        422  INVALID_PIPELINE     every pipeline problem at once
    │   └── ModificationRejected    422  INVALID_MODIFICATION §7.4 rules of resumeFromCheckpoint
    ├── Unauthorized                401  UNAUTHORIZED         missing or wrong API key
    ├── ResourceNotFound            404
    │   ├── ProcessorNotFound            PROCESSOR_NOT_FOUND
    │   ├── ConnectionNotFound           CONNECTION_NOT_FOUND
    │   └── DlqNotConfigured             DLQ_NOT_CONFIGURED
    ├── ResourceConflict            409
    │   ├── InvalidTransition            INVALID_STATE_TRANSITION
    │   ├── ProcessorExists              PROCESSOR_ALREADY_EXISTS
    │   ├── ConnectionExists             CONNECTION_ALREADY_EXISTS
    │   ├── ConnectionInUse              CONNECTION_IN_USE
    │   ├── ConnectionTypeMismatch       CONNECTION_TYPE_MISMATCH
    │   ├── ConcurrentModification       CONCURRENT_MODIFICATION
    │   └── StorageNotShared             STORAGE_NOT_SHARED  (service.runtime.shared_storage)
    ├── PayloadTooLarge             413  PAYLOAD_TOO_LARGE
    ├── EngineUnavailable           503  ENGINE_UNAVAILABLE   Spark could not be started
    └── StoreUnavailable            503  STORE_UNAVAILABLE    a store (SQLite, MongoDB) failed

Store errors that reach a handler are mapped by family (`service.stores.errors`):
`AlreadyExists`/`Conflict` 409, `NotFound` 404, `InvalidQuery`/`InvalidDocument` 422, and
anything else, like a MongoDB server that cannot be reached, 503.

Spark failures of a running processor are not exceptions here: the manager records them on
the processor (`state=FAILED`, `error={code, message}`). Anything unexpected becomes a bare
500 `INTERNAL_ERROR` without a stack trace (it is logged server-side).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from pipeline_stages._base import Problem
from pipeline_stages._problems import loc_to_path
from service.stores import (
    AlreadyExists,
    Conflict,
    InvalidDocument,
    InvalidQuery,
    NotFound,
    StoreError,
)

log = logging.getLogger("sluice.service")


class SluiceError(Exception):
    """Base of every error the API reports.

    Attributes:
        status: HTTP status code.
        error_code: Stable UPPER_SNAKE identifier (Atlas `errorCode`).
        detail: Human-readable explanation.
        problems: `{code, path, message}` entries, path first.
        warnings: Non-fatal problems (e.g. lint warnings of a rejected pipeline).
    """

    status = HTTPStatus.INTERNAL_SERVER_ERROR
    error_code = "INTERNAL_ERROR"

    def __init__(
        self,
        detail: str,
        *,
        problems: Sequence[Problem] = (),
        warnings: Sequence[Problem] = (),
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.problems = list(problems)
        self.warnings = list(warnings)

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return error_body(
            self.status,
            self.error_code,
            self.detail,
            problems=self.problems,
            warnings=self.warnings,
        )


class RequestInvalid(SluiceError):
    """The request is well-formed HTTP but its content is not acceptable."""

    status = HTTPStatus.UNPROCESSABLE_ENTITY
    error_code = "INVALID_REQUEST"


class PipelineRejected(RequestInvalid):
    """The pipeline has problems; all of them are listed."""

    error_code = "INVALID_PIPELINE"


class ModificationRejected(RequestInvalid):
    """A modify breaks the rules of `resumeFromCheckpoint: true` (atlas-semantics.md §7.4)."""

    error_code = "INVALID_MODIFICATION"


class Unauthorized(SluiceError):
    """No API key, or not one of the accepted keys."""

    status = HTTPStatus.UNAUTHORIZED
    error_code = "UNAUTHORIZED"


class ResourceNotFound(SluiceError):
    """The named resource does not exist."""

    status = HTTPStatus.NOT_FOUND
    error_code = "RESOURCE_NOT_FOUND"


class ProcessorNotFound(ResourceNotFound):
    """No processor has this name."""

    error_code = "PROCESSOR_NOT_FOUND"

    def __init__(self, name: str) -> None:
        super().__init__(f"no processor named {name!r}")


class ConnectionNotFound(ResourceNotFound):
    """No connection has this name."""

    error_code = "CONNECTION_NOT_FOUND"

    def __init__(self, name: str, *, path: str = "") -> None:
        problem = Problem("unknown_connection", path, f"no connection named {name!r}")
        super().__init__(f"no connection named {name!r}", problems=[problem] if path else [])


class DlqNotConfigured(ResourceNotFound):
    """The processor has no DLQ (and the service has no default DLQ)."""

    error_code = "DLQ_NOT_CONFIGURED"


class ResourceConflict(SluiceError):
    """The request conflicts with the current state of a resource."""

    status = HTTPStatus.CONFLICT
    error_code = "CONFLICT"


class InvalidTransition(ResourceConflict):
    """The lifecycle state machine does not allow this action in the current state."""

    error_code = "INVALID_STATE_TRANSITION"

    def __init__(
        self, *, processor: str, current: str, action: str, allowed: Sequence[str]
    ) -> None:
        where = ", ".join(allowed) or "no state"
        detail = (
            f"cannot {action} processor {processor!r}: it is {current}; "
            f"{action} is allowed from {where}"
        )
        super().__init__(detail, problems=[Problem("invalid_transition", "/state", detail)])
        self.current = current
        self.action = action


class ProcessorExists(ResourceConflict):
    """Another processor already has this name."""

    error_code = "PROCESSOR_ALREADY_EXISTS"

    def __init__(self, name: str) -> None:
        detail = f"a processor named {name!r} already exists"
        super().__init__(detail, problems=[Problem("already_exists", "/name", detail)])


class ConnectionExists(ResourceConflict):
    """Another connection (or a built-in one) already has this name."""

    error_code = "CONNECTION_ALREADY_EXISTS"

    def __init__(self, name: str) -> None:
        detail = f"a connection named {name!r} already exists"
        super().__init__(detail, problems=[Problem("already_exists", "/name", detail)])


class ConnectionInUse(ResourceConflict):
    """The connection is built in, or processors still reference it."""

    error_code = "CONNECTION_IN_USE"


class ConnectionTypeMismatch(ResourceConflict):
    """The connection exists but is of the wrong type for this use."""

    error_code = "CONNECTION_TYPE_MISMATCH"


class ConcurrentModification(ResourceConflict):
    """Another request changed the processor at the same time; retry."""

    error_code = "CONCURRENT_MODIFICATION"


class PayloadTooLarge(SluiceError):
    """The request body is larger than `SLUICE_MAX_BODY_BYTES`."""

    status = HTTPStatus.REQUEST_ENTITY_TOO_LARGE
    error_code = "PAYLOAD_TOO_LARGE"


class EngineUnavailable(SluiceError):
    """Spark could not be started (or not in time)."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    error_code = "ENGINE_UNAVAILABLE"


class StoreUnavailable(SluiceError):
    """A store failed (MongoDB unreachable, SQLite I/O error); retrying may help."""

    status = HTTPStatus.SERVICE_UNAVAILABLE
    error_code = "STORE_UNAVAILABLE"


def from_store_error(error: Exception) -> SluiceError:
    """The API error for a store error that no manager method translated."""
    detail = getattr(error, "message", None) or str(error).split("\n", 1)[0][:500]
    # Only Sluice's store errors carry a problem; PyMongo's `OperationFailure` has a numeric
    # `code` and no `path`.
    problems = [Problem(error.code, error.path, detail)] if isinstance(error, StoreError) else []
    family: type[SluiceError]
    if isinstance(error, AlreadyExists | Conflict):
        family = ResourceConflict
    elif isinstance(error, NotFound):
        family = ResourceNotFound
    elif isinstance(error, InvalidDocument | InvalidQuery):
        family = RequestInvalid
    else:
        family = StoreUnavailable
    return family(detail, problems=problems)


# --------------------------------------------------------------------------- bodies


def error_body(
    status: int,
    error_code: str,
    detail: str,
    *,
    problems: Sequence[Problem] = (),
    warnings: Sequence[Problem] = (),
) -> dict[str, Any]:
    """The `ErrorBody` JSON: Atlas's ApiError fields plus `problems` and `warnings`."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Error"
    return {
        "error": int(status),
        "errorCode": error_code,
        "reason": reason,
        "detail": detail,
        "problems": [p.to_dict() for p in problems],
        "warnings": [w.to_dict() for w in warnings],
    }


def request_path(loc: Sequence[str | int]) -> str:
    """A JSON pointer from a FastAPI/pydantic `loc`: the body root is `/`, others are named.

    `("body", "pipeline", 0)` -> `/pipeline/0`; `("query", "limit")` -> `/query/limit`. The
    pointer itself is built by the pipeline language's `loc_to_path`, so request errors and
    pipeline errors name paths by the same rules.
    """
    parts = tuple(loc)
    if parts and parts[0] == "body":
        parts = parts[1:]
    return loc_to_path("", parts)


def problems_from_request_error(exc: RequestValidationError) -> list[Problem]:
    """One problem per pydantic error of a request, with its JSON-pointer path."""
    problems = []
    for error in exc.errors():
        code = str(error.get("type", "invalid"))
        message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
        problems.append(Problem(code, request_path(error.get("loc", ())), message))
    return problems


#: The methods `Allow` can name.
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app answers on the request's path (for `Allow`).

    Starlette's own 405 names only the first route whose path matched; a path served by
    several routes (`GET`, `PATCH` and `DELETE /processors/{name}`) allows all their methods.
    """
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes
        )
    ]


def install_handlers(app: FastAPI) -> None:
    """Map every error family to its HTTP response (one handler per family)."""

    @app.exception_handler(SluiceError)
    async def _sluice(_: Request, exc: SluiceError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
        return JSONResponse(exc.body(), status_code=int(exc.status), headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = problems_from_request_error(exc)
        detail = f"{len(problems)} problem(s) in the request"
        body = error_body(422, RequestInvalid.error_code, detail, problems=problems)
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "INVALID_BODY", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(
            exc.status_code, "HTTP_ERROR"
        )
        headers = dict(exc.headers or {})
        detail = str(exc.detail)
        if exc.status_code == 405:
            allowed = allowed_methods(request)
            headers["Allow"] = ", ".join(allowed)
            detail = f"{request.method} is not allowed here; use {', '.join(allowed)}"
        body = error_body(exc.status_code, code, detail)
        return JSONResponse(body, status_code=exc.status_code, headers=headers or None)

    async def _store(_: Request, exc: Exception) -> JSONResponse:
        log.warning("store error: %s", str(exc).split("\n", 1)[0][:500])
        error = from_store_error(exc)
        return JSONResponse(error.body(), status_code=int(error.status))

    from pymongo.errors import PyMongoError

    for family in (StoreError, PyMongoError, sqlite3.Error):
        app.add_exception_handler(family, _store)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        body = error_body(500, "INTERNAL_ERROR", "internal error; see the service log")
        return JSONResponse(body, status_code=500)
