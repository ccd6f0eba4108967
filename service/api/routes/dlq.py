"""`/api/v1/processors/{name}/dlq`: inspect and purge a processor's DLQ."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BeforeValidator

from service.api import present
from service.api.deps import ManagerDep, ProcessorName
from service.manager.dlq import DlqFilters
from service.schemas.processors import DlqPage, DlqPurged

router = APIRouter(prefix="/processors", tags=["dlq"])

#: Query parameter lengths, in characters: with the rest of the URL, percent-encoded (up to
#: 12 bytes a character), they stay under the server's bound on a request head
#: (`service.main.MAX_REQUEST_HEAD_BYTES`).
MAX_REASON_CHARS = 4_096

Reason = Annotated[
    str | None, Query(max_length=MAX_REASON_CHARS, description="errInfo.reason, exactly")
]
Operator = Annotated[
    str | None, Query(alias="operatorName", max_length=200, description="operatorName, exactly")
]


def _date_time_text(value: Any) -> Any:
    """Only ISO-8601 text: pydantic would read `0.5` or `1700000000` as Unix seconds."""
    if not isinstance(value, str) or _NUMBER.fullmatch(value.strip()):
        raise ValueError(
            f"must be an ISO-8601 date-time such as 2024-01-01T00:00:00Z, got {value!r}"
        )
    return value


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
DateTimeText = Annotated[datetime, BeforeValidator(_date_time_text)]
From = Annotated[DateTimeText | None, Query(alias="from", description="dlqTime >= from (ISO-8601)")]
To = Annotated[DateTimeText | None, Query(alias="to", description="dlqTime < to (ISO-8601)")]
#: `filter` as the OpenAPI document describes it: a JSON object in the query string (the
#: route reads it from the request, so FastAPI does not describe it as a plain string).
FILTER_PARAMETER: dict[str, Any] = {
    "name": "filter",
    "in": "query",
    "required": False,
    "description": "An MQL filter on the DLQ documents, as JSON.",
    "content": {"application/json": {"schema": {"type": "object"}}},
}
_FILTER_DOC: dict[str, Any] = {"parameters": [FILTER_PARAMETER]}


def _filters(
    request: Request,
    reason: Reason = None,
    operator_name: Operator = None,
    dlq_from: From = None,
    dlq_to: To = None,
) -> DlqFilters:
    """The query parameters both routes filter by."""
    mql = request.query_params.get("filter")
    return DlqFilters(reason, operator_name, dlq_from, dlq_to, mql)


Filters = Annotated[DlqFilters, Depends(_filters)]


@router.get(
    "/{name}/dlq", response_model=DlqPage, responses=present.errors(404), openapi_extra=_FILTER_DOC
)
def list_dlq(
    name: ProcessorName,
    manager: ManagerDep,
    filters: Filters,
    limit: Annotated[int, Query(ge=0, le=1000)] = 100,
    skip: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    sort: Literal["asc", "desc"] = "asc",
) -> dict[str, Any]:
    """The processor's DLQ documents by `dlqTime`, filtered, with the total count."""
    page = replace(filters, limit=limit, skip=skip, newest_first=sort == "desc")
    results, total = manager.dlq_targets.find(manager.get(name), page)
    return {"results": results, "totalCount": total}


@router.delete(
    "/{name}/dlq",
    response_model=DlqPurged,
    responses=present.errors(404),
    openapi_extra=_FILTER_DOC,
)
def purge_dlq(name: ProcessorName, manager: ManagerDep, filters: Filters) -> dict[str, Any]:
    """Delete the processor's DLQ documents matching the filters (all without filters)."""
    return {"deletedCount": manager.dlq_targets.purge(manager.get(name), filters)}
