"""`/api/v1/processors/{name}/dlq`: inspect, purge and replay a processor's DLQ."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request

from service.api import present
from service.api.deps import ManagerDep, ProcessorName, ReplayerDep
from service.manager.dlq import DlqFilters
from service.schemas.dlq import DateTimeText, DlqReplay, DlqReplayed
from service.schemas.processors import DlqPage, DlqPurged

router = APIRouter(prefix="/processors", tags=["dlq"])

#: Query parameter lengths, in characters: with the rest of the URL, percent-encoded (up to
#: 12 bytes a character), they stay under the server's bound on a request head
#: (`service.main.MAX_REQUEST_HEAD_BYTES`).
MAX_REASON_CHARS = 4_096

Reason = Annotated[
    str | None,
    Query(max_length=MAX_REASON_CHARS, description="errInfo.reason contains this (any case)"),
]
Replayed = Annotated[
    bool | None, Query(description="true: replayed to some target; false: never replayed")
]
ReplayedTo = Annotated[
    str | None,
    Query(
        alias="replayedTo",
        max_length=80,
        description="replayedTo holds this target: processor:<name> or connection:<name>",
    ),
]
Operator = Annotated[
    str | None, Query(alias="operatorName", max_length=200, description="operatorName, exactly")
]


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
    replayed: Replayed = None,
    replayed_to: ReplayedTo = None,
) -> DlqFilters:
    """The query parameters the list and purge routes filter by."""
    mql = request.query_params.get("filter")
    return DlqFilters(
        reason, operator_name, dlq_from, dlq_to, mql, replayed=replayed, replayed_to=replayed_to
    )


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


@router.post("/{name}/dlq:replay", response_model=DlqReplayed, responses=present.errors(404, 409))
def replay_dlq(
    name: ProcessorName, body: DlqReplay, manager: ManagerDep, replayer: ReplayerDep
) -> dict[str, Any]:
    """Replay the matching DLQ records' documents into an HttpIngest connection (or the one a
    processor reads), each at most once per target; `dryRun` only counts."""
    record = manager.get(name)
    target = body.target
    connection = replayer.connection_of(
        processor=target.processor, connection=target.connectionName
    )
    mql = json.dumps(body.filter) if body.filter is not None else None
    filters = DlqFilters(body.reason, body.operatorName, body.from_, body.to, mql)
    result = replayer.replay(
        record, filters, target=target.key, connection=connection, dry_run=body.dryRun
    )
    return {
        "replayed": result.replayed,
        "skipped": result.skipped,
        "notReplayable": result.not_replayable,
    }
