"""`/api/v1/pipelines`: `:validate` (the checks of processor creation, without creating
anything) and `:process` (an ephemeral processor whose output streams back as NDJSON)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from service.api import present
from service.api.deps import EphemeralDep, ManagerDep
from service.manager.ephemeral import EphemeralRun, EphemeralRuns
from service.schemas.processors import PipelineProcess, PipelineValidate, PipelineValidation

router = APIRouter(prefix="/pipelines", tags=["pipelines"])

NDJSON = "application/x-ndjson"

#: One frame of the `:process` stream (`service.manager.ephemeral` describes them).
_FRAME_SCHEMA: dict[str, Any] = {
    "description": "One NDJSON line: `started`, then `out` / `err` lines, then `exit`.",
    "type": "object",
    "minProperties": 1,
    "maxProperties": 1,
    "properties": {
        "started": {"type": "object", "properties": {"name": {"type": "string"}}},
        "out": {"description": "A line `sluice process` prints on stdout."},
        "err": {"type": "object", "description": "A line it prints on stderr."},
        "exit": {"type": "integer", "enum": [0, 1, 2]},
    },
}


@router.post(":validate", response_model=PipelineValidation, responses=present.errors())
def validate_pipeline(body: PipelineValidate, manager: ManagerDep) -> dict[str, Any]:
    """Every problem `POST /processors` would report for this pipeline, with 200.

    A pipeline with problems is `valid: false`, not an error; 422 is for a body that is not
    `{pipeline: [...], options?: {...}}`.
    """
    dlq = body.options.dlq.model_dump() if body.options.dlq else None
    problems, warnings, compiled = manager.validate(body.pipeline, dlq)
    return {
        "valid": not problems,
        "problems": [p.to_dict() for p in problems],
        "warnings": [w.to_dict() for w in warnings],
        "compiled": compiled,
    }


@router.post(
    ":process",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The run's output as NDJSON frames, streamed as it is produced",
            "content": {NDJSON: {"schema": _FRAME_SCHEMA}},
        },
        **present.errors(409, 503),
    },
)
def process_pipeline(body: PipelineProcess, ephemeral: EphemeralDep) -> StreamingResponse:
    """Run a pipeline as an ephemeral processor on the service's SparkSession (`sluice
    process`), streaming what it prints; it is stopped when the client disconnects.

    Problems found without Spark are a 422 before anything runs; compile problems arrive in
    the stream (`err` and `exit: 2`), as `sluice process` reports them.
    """
    run = ephemeral.prepare(body)
    return StreamingResponse(_frames(ephemeral, run), media_type=NDJSON)


async def _frames(ephemeral: EphemeralRuns, run: EphemeralRun) -> AsyncIterator[str]:
    """The run's frames; a disconnected client cancels this generator, which cancels the run."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[str | None] = asyncio.Queue()

    def emit(frame: str | None) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, frame)
        except RuntimeError:  # the loop is closed: the service is shutting down
            run.cancel.set()

    ephemeral.start(run, emit)
    try:
        while (frame := await queue.get()) is not None:
            yield frame
    finally:
        run.cancel.set()
