"""`POST /api/v1/ingest/{connectionName}`: durable HTTP ingest into a connection's spool."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from service.api import present
from service.api.deps import ConnectionName, IngestDep
from service.schemas.processors import IngestAccepted

router = APIRouter(tags=["ingest"])

#: Text bodies hold a record when something other than the whitespace `bytes.strip` removes
#: (`_WS`) follows the UTF-8 byte order mark the service drops from the start of a body; an
#: empty body is refused (422). The three branches: a BOM first, then a record; no BOM, a
#: record; whitespace, then a BOM (no longer the first character, so a record).
_WS = r" \t\n\r\x0b\x0c"
_LINES = {
    "type": "string",
    "pattern": rf"^(?:\ufeff[{_WS}]*[^{_WS}]|[{_WS}]*[^{_WS}\ufeff]|[{_WS}]+\ufeff)",
}

_BODY = {
    "requestBody": {
        "required": True,
        "description": "A JSON array of records, one JSON record, or NDJSON lines. A record "
        "that is not a JSON object is accepted, counted in `invalid`, and sent to the DLQ by "
        "every processor reading the connection; an empty array is accepted as no records.",
        "content": {
            "application/json": {"schema": {}},
            "application/x-ndjson": {"schema": _LINES},
            "text/plain": {"schema": _LINES},
        },
    }
}


@router.post(
    "/ingest/{connectionName}",
    status_code=202,
    response_model=IngestAccepted,
    responses=present.errors(404, 409),
    openapi_extra=_BODY,
)
async def ingest(
    connectionName: ConnectionName, request: Request, service: IngestDep
) -> dict[str, Any]:  # noqa: N803 - Atlas's name
    """Append the records durably (fsync) and answer 202 only then."""
    body = await request.body()
    content_type = request.headers.get("content-type")
    return await run_in_threadpool(service.ingest, connectionName, body, content_type)
