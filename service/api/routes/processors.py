"""`/api/v1/processors`: definitions, lifecycle, stats and sample (thin routes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from pydantic import AfterValidator

from service.api import present
from service.api.deps import BY_NAME, EphemeralDep, ManagerDep, ProcessorName
from service.schemas.processors import (
    ProcessorCreate,
    ProcessorModify,
    ProcessorPublic,
    ProcessorsPublic,
    ProcessorStats,
    SampleMessages,
    StartRequest,
)

router = APIRouter(prefix="/processors", tags=["processors"])


def _scale(value: int) -> int:
    if value not in (1, 1024):
        raise ValueError("scale must be 1 (bytes) or 1024 (KiB)")
    return value


@router.post(
    "", status_code=201, response_model=ProcessorPublic, responses=present.errors(409, 503)
)
def create_processor(body: ProcessorCreate, manager: ManagerDep) -> dict[str, Any]:
    """Create a processor (CREATED). Invalid pipelines get 422 with every problem."""
    record, warnings = manager.create(body)
    return present.processor(manager, record, warnings)


@router.get("", response_model=ProcessorsPublic, responses=present.errors())
def list_processors(
    manager: ManagerDep,
    ephemeral: EphemeralDep,
    itemsPerPage: Annotated[int, Query(ge=1, le=500)] = 100,  # noqa: N803 - Atlas's name
    pageNum: Annotated[int, Query(ge=1, le=1_000_000)] = 1,  # noqa: N803 - Atlas's name
) -> dict[str, Any]:
    """A page of processors with their state and stats; the running ephemeral ones
    (`POST /pipelines:process`, `ephemeral: true`) come after the stored ones."""
    offset = (pageNum - 1) * itemsPerPage
    records, total = manager.list(offset=offset, limit=itemsPerPage)
    results = [present.processor(manager, r) for r in records]
    running = ephemeral.list()
    if len(results) < itemsPerPage:
        first = max(0, offset - total)
        results += [run.public() for run in running[first : first + itemsPerPage - len(results)]]
    return {"results": results, "totalCount": total + len(running)}


@router.get(BY_NAME, response_model=ProcessorPublic, responses=present.errors(404))
def get_processor(name: ProcessorName, manager: ManagerDep) -> dict[str, Any]:
    """One processor with its state and stats."""
    return present.processor(manager, manager.get(name))


@router.patch(BY_NAME, response_model=ProcessorPublic, responses=present.errors(404, 409, 503))
def modify_processor(
    name: ProcessorName, body: ProcessorModify, manager: ManagerDep
) -> dict[str, Any]:
    """Change name, pipeline or DLQ of a processor that is not STARTED."""
    record, warnings = manager.modify(name, body)
    return present.processor(manager, record, warnings)


@router.delete(BY_NAME, status_code=204, response_class=Response, responses=present.errors(404))
def delete_processor(name: ProcessorName, manager: ManagerDep) -> Response:
    """Stop (if started) and delete a processor with its checkpoints and state."""
    manager.drop(name)
    return Response(status_code=204)


@router.post(
    "/{name}:start", response_model=ProcessorPublic, responses=present.errors(404, 409, 503)
)
def start_processor(
    name: ProcessorName,
    manager: ManagerDep,
    body: Annotated[StartRequest | None, Body()] = None,
) -> dict[str, Any]:
    """Start from the checkpoint (or fresh with `resumeFromCheckpoint: false`)."""
    resume = body.resumeFromCheckpoint if body is not None else True
    return present.processor(manager, manager.start(name, resume=resume))


@router.post("/{name}:stop", response_model=ProcessorPublic, responses=present.errors(404, 409))
def stop_processor(name: ProcessorName, manager: ManagerDep) -> dict[str, Any]:
    """Stop a STARTED (or acknowledge a FAILED) processor; its checkpoint is kept."""
    return present.processor(manager, manager.stop(name))


@router.get("/{name}/stats", response_model=ProcessorStats, responses=present.errors(404))
def get_stats(
    name: ProcessorName,
    manager: ManagerDep,
    verbose: bool = False,
    scale: Annotated[
        int,
        Query(description="1 = bytes, 1024 = KiB", json_schema_extra={"enum": [1, 1024]}),
        AfterValidator(_scale),
    ] = 1,
) -> dict[str, Any]:
    """Atlas's stats; `verbose` adds per-operator stats and the last micro-batch."""
    return manager.stats(manager.get(name), verbose=verbose, scale=scale)


@router.get("/{name}/sample", response_model=SampleMessages, responses=present.errors(404))
def get_sample(
    name: ProcessorName,
    manager: ManagerDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    after: Annotated[str | None, Query(pattern=r"^\d{1,18}\.\d{1,18}\.\d{1,18}$")] = None,
) -> dict[str, Any]:
    """Recent output documents and DLQ messages (`{_dlqMessage: ...}`), oldest first."""
    messages, cursor = manager.sample(name, limit=limit, after=after)
    return {"messages": messages, "cursorId": cursor}
