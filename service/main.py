"""`create_app()`: the FastAPI application (routers, error handlers, body limit, lifespan).

Run it with `sluice serve` (uvicorn). The lifespan starts the manager (Spark in the
background, then processors that were STARTED resume from their checkpoints) and, on
shutdown (SIGTERM/SIGINT), stops every query cleanly before Spark.

Building the app sets the process umask to 077 first (`service.config.private_files`), so
everything the service and its Spark JVM write is readable by the service user only, and
refuses a data directory other users can write to.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from service.api.deps import Services, require_api_key
from service.api.routes import connections, dlq, ingest, pipelines, processors, system
from service.api.routes.system import VERSION
from service.auth import ApiKeyChecker, accepted_keys
from service.config.private_files import restrict_umask
from service.config.settings import Settings
from service.console import install_console, start_console, stop_console
from service.errors import error_body, install_handlers
from service.manager.connections import ConnectionRegistry
from service.manager.ephemeral import EphemeralRuns
from service.manager.ingest import IngestService
from service.manager.processors import ProcessorManager
from service.manager.replay import DlqReplayer
from service.runtime.engine import Engine
from service.runtime.spark_engine import SparkEngine
from service.stores import SecretBox, Spool, Stores, open_stores

API_PREFIX = "/api/v1"

#: The largest request head (request line and headers) the HTTP server reads, in bytes.
#: uvicorn's default (16 KiB) is below the longest URL the OpenAPI document allows (the DLQ
#: routes' `filter` and `reason`, percent-encoded), and a longer head gets uvicorn's own
#: plain-text 400 instead of the API's answer.
MAX_REQUEST_HEAD_BYTES = 1 << 20

log = logging.getLogger("sluice.service")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyLimit:
    """ASGI middleware answering 413 for bodies over `limit` bytes.

    A declared `Content-Length` over the limit is refused before the app runs. A body sent
    without one (chunked) is cut off as soon as it passes the limit, and whatever the app
    would answer is replaced by the 413.
    """

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the declared length, then count the bytes actually received."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(send)
            return
        state = {"received": 0, "exceeded": False, "started": False}

        async def limited_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                if state["received"] > self.limit:
                    state["exceeded"] = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            if state["exceeded"]:
                if message["type"] == "http.response.start" and not state["started"]:
                    state["started"] = True
                    await self._refuse(send)
                return
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            # The app may fail on the cut-off body (e.g. ClientDisconnect); answer 413 then.
            if not state["exceeded"]:
                raise
            if not state["started"]:
                state["started"] = True
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            error_body(
                413, "PAYLOAD_TOO_LARGE", f"request bodies are limited to {self.limit} bytes"
            )
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _operation_id(route: APIRoute) -> str:
    """Stable operation ids, `{tag}-{route name}`, for the CLI and generated clients."""
    return f"{route.tags[0]}-{route.name}" if route.tags else route.name


def build_services(settings: Settings, *, engine: Engine | None, stores: Stores | None) -> Services:
    """Open the stores and build the manager and friends (Spark starts later, in `open`)."""
    if engine is None:
        engine = SparkEngine(settings)
    if stores is None:
        key = settings.secret_key.get_secret_value() if settings.secret_key else None
        secrets = SecretBox.load(
            data_dir=settings.data_dir, key=key, key_file=settings.secret_key_file
        )
        stores = open_stores(settings.store_url, data_dir=settings.data_dir, secrets=secrets)
    registry = ConnectionRegistry(stores)
    manager = ProcessorManager(
        settings=settings, stores=stores, engine=engine, connections=registry
    )
    ingest = IngestService(Spool(settings.data_dir), registry)
    replayer = DlqReplayer(
        stores=stores, dlq_targets=manager.dlq_targets, connections=registry, ingest=ingest
    )
    ephemeral = EphemeralRuns(
        engine=engine, connections=registry, documents=stores.documents, settings=settings
    )
    return Services(
        settings=settings,
        stores=stores,
        manager=manager,
        connections=registry,
        ingest=ingest,
        auth=ApiKeyChecker(accepted_keys(settings.api_keys, settings.data_dir)),
        replayer=replayer,
        ephemeral=ephemeral,
    )


def create_app(
    settings: Settings | None = None,
    *,
    engine: Engine | None = None,
    stores: Stores | None = None,
) -> FastAPI:
    """The Sluice API (see the module docstring).

    Args:
        settings: Defaults to `Settings()` from the environment.
        engine: Defaults to the Spark engine; tests pass a `FakeEngine`.
        stores: Defaults to the stores named by the settings (closed at shutdown; stores
            passed in are left open, so a test can run the lifespan more than once).
    """
    restrict_umask()
    settings = settings or Settings()
    settings.prepare_directories()
    owns_stores = stores is None
    services = build_services(settings, engine=engine, stores=stores)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        services.manager.open()
        start_console(app)
        try:
            yield
        finally:
            await run_in_threadpool(stop_console, app)
            await run_in_threadpool(services.ephemeral.close)
            log.info("shutting down: stopping processor queries")
            await run_in_threadpool(services.manager.close)
            if owns_stores:
                services.stores.close()

    app = FastAPI(
        title="Sluice",
        summary="Atlas-style stream processing on Apache Spark",
        version=_version(),
        lifespan=lifespan,
        generate_unique_id_function=_operation_id,
        # Served by `system.schema_router` behind the API key; no /docs or /redoc (see there).
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.services = services
    install_handlers(app)
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_api_key)])
    for module in (processors, pipelines, dlq, connections, ingest):
        api.include_router(module.router)
    install_console(app, api, services)
    app.include_router(api)
    app.include_router(system.health_router)
    app.include_router(system.metrics_router)
    app.include_router(system.schema_router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    return app


def _version() -> str:
    return VERSION
