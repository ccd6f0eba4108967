"""`/api/v1/processors`: definitions, lifecycle, stats and sample (thin routes)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from pydantic import AfterValidator

from service.api import present
from service.api.deps import BY_NAME, EphemeralDep, ManagerDep, ProcessorName
from service.errors import ProcessorNotFound
from service.manager.ephemeral import EphemeralRun, EphemeralRuns
from service.schemas.processors import (
    ProcessorCreate,
    ProcessorModify,
    ProcessorPublic,
    ProcessorsPublic,
    SampleMessages,
    StartRequest,
)
from service.schemas.stats import ProcessorStats

router = APIRouter(prefix="/processors", tags=["processors"])


def _scale(value: int) -> int:
    if value not in (1, 1024):
        raise ValueError("scale must be 1 (bytes) or 1024 (KiB)")
    return value


def running(name: str, ephemeral: EphemeralRuns, missing: ProcessorNotFound) -> EphemeralRun:
    """The ephemeral processor `name` (`sluice process` on this service), which the by-name
    routes answer for when no stored processor has that name; `missing` otherwise."""
    run = ephemeral.get(name)
    if run is None:
        raise missing
    return run


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
def get_processor(
    name: ProcessorName, manager: ManagerDep, ephemeral: EphemeralDep
) -> dict[str, Any]:
    """One processor with its state and stats (a running ephemeral one too)."""
    try:
        return present.processor(manager, manager.get(name))
    except ProcessorNotFound as missing:
        return running(name, ephemeral, missing).public()


@router.patch(BY_NAME, response_model=ProcessorPublic, responses=present.errors(404, 409, 503))
def modify_processor(
    name: ProcessorName, body: ProcessorModify, manager: ManagerDep
) -> dict[str, Any]:
    """Change name, pipeline or DLQ of a processor that is not STARTED."""
    record, warnings = manager.modify(name, body)
    return present.processor(manager, record, warnings)


@router.delete(BY_NAME, status_code=204, response_class=Response, responses=present.errors(404))
def delete_processor(name: ProcessorName, manager: ManagerDep, ephemeral: EphemeralDep) -> Response:
    """Stop (if started) and delete a processor with its checkpoints and state; an ephemeral
    one is stopped, which ends its client's stream, and leaves the list."""
    try:
        manager.drop(name)
    except ProcessorNotFound as missing:
        running(name, ephemeral, missing).cancel.set()
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
def stop_processor(
    name: ProcessorName, manager: ManagerDep, ephemeral: EphemeralDep
) -> dict[str, Any]:
    """Stop a STARTED (or acknowledge a FAILED) processor; its checkpoint is kept. An
    ephemeral one is stopped as if its client had disconnected."""
    try:
        return present.processor(manager, manager.stop(name))
    except ProcessorNotFound as missing:
        run = running(name, ephemeral, missing)
        run.cancel.set()
        return run.public()


@router.get("/{name}/stats", response_model=ProcessorStats, responses=present.errors(404))
def get_stats(
    name: ProcessorName,
    manager: ManagerDep,
    ephemeral: EphemeralDep,
    verbose: bool = False,
    scale: Annotated[
        int,
        Query(description="1 = bytes, 1024 = KiB", json_schema_extra={"enum": [1, 1024]}),
        AfterValidator(_scale),
    ] = 1,
) -> dict[str, Any]:
    """Atlas's stats; `verbose` adds per-operator stats and the last micro-batch. An
    ephemeral processor reports the counts of its output stream only."""
    try:
        record = manager.get(name)
    except ProcessorNotFound as missing:
        return running(name, ephemeral, missing).stats()
    return manager.stats(record, verbose=verbose, scale=scale)


@router.get("/{name}/sample", response_model=SampleMessages, responses=present.errors(404))
def get_sample(
    name: ProcessorName,
    manager: ManagerDep,
    ephemeral: EphemeralDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 20,
    after: Annotated[str | None, Query(pattern=r"^\d{1,18}\.\d{1,18}\.\d{1,18}$")] = None,
) -> dict[str, Any]:
    """Recent output documents and DLQ messages (`{_dlqMessage: ...}`), oldest first (an
    ephemeral processor's newest ones, without a cursor)."""
    try:
        messages, cursor = manager.sample(name, limit=limit, after=after)
    except ProcessorNotFound as missing:
        return {"messages": running(name, ephemeral, missing).sample(limit), "cursorId": None}
    return {"messages": messages, "cursorId": cursor}
