"""`GET /api/v1/processors/{name}/stats/history`: the console's chart data (`history.py`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field

from service.api import present
from service.api.deps import EphemeralDep, ManagerDep, ProcessorName
from service.api.routes.processors import running
from service.console.history import StatsHistory
from service.errors import ProcessorNotFound

router = APIRouter(prefix="/processors", tags=["processors"])


class HistoryPoint(BaseModel):
    """One sample of a processor's stats; rates are per second since the previous sample."""

    time: str = Field(description="When the sample was taken (ISO-8601, UTC).")
    status: str
    inputMessageCount: int
    outputMessageCount: int
    dlqMessageCount: int
    stateSize: float
    watermark: str | None = Field(description="The event-time watermark, null when unknown.")
    eventTimeLagSeconds: float | None = Field(
        description="Sample time minus the watermark; null when there is no watermark."
    )
    inputRate: float | None = Field(description="Messages/s; null for the first sample.")
    outputRate: float | None
    dlqRate: float | None
    dlqRateByOperator: dict[str, float | None] = Field(
        description="DLQ messages/s per operator (operatorStats' names)."
    )


class StatsHistoryOut(BaseModel):
    """The last minutes of a processor's stats, oldest first (kept in memory only)."""

    name: str
    intervalSeconds: float = Field(description="Seconds between samples.")
    points: list[HistoryPoint]


async def get_history(request: Request) -> StatsHistory:
    """The app's stats history (`install_console` puts it on the app state)."""
    history: StatsHistory = request.app.state.stats_history
    return history


HistoryDep = Annotated[StatsHistory, Depends(get_history)]


@router.get("/{name}/stats/history", response_model=StatsHistoryOut, responses=present.errors(404))
def get_stats_history(
    name: ProcessorName,
    manager: ManagerDep,
    ephemeral: EphemeralDep,
    history: HistoryDep,
    last: Annotated[int | None, Query(ge=1, le=10_000, description="Newest N points only.")] = None,
) -> dict[str, Any]:
    """Recent stats samples with rates and event-time lag (the console's live charts)."""
    try:
        stored = manager.get(name).name
    except ProcessorNotFound as missing:
        # An ephemeral processor is not sampled (it lives for one `sluice process` run).
        stored = running(name, ephemeral, missing).name
    points = history.points(stored)
    return {
        "name": stored,
        "intervalSeconds": history.interval_seconds,
        "points": points[-last:] if last else points,
    }
