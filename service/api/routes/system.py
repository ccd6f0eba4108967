"""`/healthz` (no API key), `/metrics` (Prometheus text) and `/openapi.json` (API key).

The OpenAPI document needs the key like every other route that says something about this
service (its routes, its version): only `/healthz`, the console's page and its static assets
are served without one. The interactive `/docs` and `/redoc` pages are not served: they load
their scripts from a CDN and a browser cannot send a bearer header when it opens a page; the
console at `/` is the interactive front-end, and the document is
`curl -H "Authorization: Bearer $KEY" URL/openapi.json`.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from service.api import present
from service.api.deps import ServicesDep, require_api_key
from service.api.metrics import CONTENT_TYPE, ProcessorSample, render
from service.schemas.processors import Health

try:
    VERSION = version("sluice")
except PackageNotFoundError:  # running from a source tree that was not installed
    VERSION = "0+unknown"

health_router = APIRouter(tags=["system"])
metrics_router = APIRouter(tags=["system"], dependencies=[Depends(require_api_key)])
schema_router = APIRouter(dependencies=[Depends(require_api_key)])


@schema_router.get("/openapi.json", include_in_schema=False)
async def openapi_document(request: Request) -> JSONResponse:
    """The OpenAPI document (FastAPI builds it once and caches it on the app)."""
    return JSONResponse(request.app.openapi())


@health_router.get("/healthz", response_model=Health)
async def healthz(services: ServicesDep) -> dict[str, Any]:
    """Liveness: the service answers; `engine` tells whether Spark is ready."""
    engine = services.manager.engine
    # Why Spark could not start (e.g. executors on another Python version), for operators.
    error = getattr(engine, "error", None)
    return {"status": "ok", "engine": engine.state, "version": VERSION, "engineError": error}


@metrics_router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
        **present.json_errors(),
    },
)
async def metrics(services: ServicesDep) -> PlainTextResponse:
    """Per-processor counters, watermark lag, batch duration and state size."""
    text = await run_in_threadpool(services_metrics, services)
    return PlainTextResponse(text, media_type=CONTENT_TYPE)


def services_metrics(services: Any) -> str:
    """Render `/metrics` from the manager's current view."""
    manager = services.manager
    samples = []
    for record in manager.all_records():
        stats = manager.live_stats(record).snapshot()
        run = manager.runs.get(record.id)
        last = stats.pop("_lastBatch", None)
        samples.append(
            ProcessorSample(
                name=record.name,
                state=record.state.value,
                running=run is not None and run.handle is not None,
                stats=stats,
                batch_duration_ms=last.get("durationMs") if isinstance(last, dict) else None,
            )
        )
    accepted, invalid = services.ingest.counters()
    return render(
        samples,
        ingest_accepted=accepted,
        ingest_invalid=invalid,
        engine_state=manager.engine.state,
    )
