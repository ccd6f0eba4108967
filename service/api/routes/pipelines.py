"""`/api/v1/pipelines:validate`: the checks of processor creation, without creating anything."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from service.api import present
from service.api.deps import ManagerDep
from service.schemas.processors import PipelineValidate, PipelineValidation

router = APIRouter(prefix="/pipelines", tags=["pipelines"])


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
