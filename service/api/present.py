"""From records to response bodies (the `Public` rungs of the schema ladder)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pipeline_stages._base import Problem
from service.manager.processors import ProcessorManager
from service.schemas.processors import ErrorBody
from service.stores import ProcessorRecord

#: Error responses documented on every authenticated route.
COMMON_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Unreadable body (e.g. not UTF-8)"},
    401: {"description": "Missing or invalid API key"},
    413: {"description": "Request body too large"},
    422: {"description": "Invalid request"},
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The documented error responses of a route (all with the `ErrorBody` schema)."""
    described = {
        404: "Not found",
        409: "Conflict with the current state",
        503: "Spark is not available",
    }
    out: dict[int | str, dict[str, Any]] = {
        code: {**meta, "model": ErrorBody} for code, meta in COMMON_ERRORS.items()
    }
    for code in codes:
        out[code] = {"description": described.get(code, "Error"), "model": ErrorBody}
    return out


def json_errors() -> dict[int | str, dict[str, Any]]:
    """Error responses of a non-JSON route: its errors are still JSON (`ErrorBody`)."""
    schema = {"$ref": "#/components/schemas/ErrorBody"}
    return {
        code: {**meta, "content": {"application/json": {"schema": schema}}}
        for code, meta in COMMON_ERRORS.items()
    }


def processor(
    manager: ProcessorManager, record: ProcessorRecord, warnings: Iterable[Problem] = ()
) -> dict[str, Any]:
    """`ProcessorPublic` for a record (with its current stats)."""
    return {
        "_id": record.id,
        "name": record.name,
        "pipeline": json.loads(record.pipeline_json),
        "options": dict(record.options),
        "state": record.state.value,
        "error": record.error.model_dump() if record.error else None,
        "stats": manager.stats(record),
        "createdAt": record.created_at,
        "lastStateChange": record.last_state_change,
        "warnings": [w.to_dict() for w in warnings],
    }
