"""`POST /api/v1/ingest/{connectionName}`: durable HTTP ingest into a connection's spool."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from service.api import present
from service.api.deps import ConnectionName, IngestDep
from service.schemas.processors import IngestAccepted

router = APIRouter(tags=["ingest"])

_BODY = {
    "requestBody": {
        "required": True,
        "description": "A JSON array of documents (or one document), or NDJSON lines.",
        "content": {
            "application/json": {"schema": {"type": "array", "items": {"type": "object"}}},
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
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
