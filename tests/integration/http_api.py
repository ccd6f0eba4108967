"""A small HTTP API on 127.0.0.1 for the `$https` tests, run by uvicorn in a thread.

Routes: `GET /users/{id}` (JSON), `GET|POST /status/{code}` (that status, a long body),
`GET /flaky/{key}` (503 twice per key, then 200), `GET /slow/{ms}` (answers after `ms`),
`GET /text` (200, not JSON), `POST|PUT /echo` (the JSON body, query and some headers back),
`POST /sink` (records each `Idempotency-Key` once; a repeat is answered 200 too).
Every request is logged in `calls`.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route


@dataclass
class HttpApi:
    """The running API: its base URL and what it saw."""

    url: str
    calls: list[tuple[str, str]] = field(default_factory=list)
    flaky: Counter[str] = field(default_factory=Counter)
    sink: dict[str, Any] = field(default_factory=dict)
    sink_requests: int = 0


def _app(api: HttpApi) -> Starlette:
    async def log(request: Request) -> None:
        api.calls.append((request.method, request.url.path))

    async def user(request: Request) -> Response:
        await log(request)
        uid = request.path_params["uid"]
        return JSONResponse({"id": uid, "name": f"user-{uid}", "tags": '["a", "b"]'})

    async def status(request: Request) -> Response:
        await log(request)
        return PlainTextResponse("boom " * 400, status_code=int(request.path_params["code"]))

    async def flaky(request: Request) -> Response:
        await log(request)
        key = request.path_params["key"]
        api.flaky[key] += 1
        if api.flaky[key] <= 2:
            return PlainTextResponse("busy", status_code=503)
        return JSONResponse({"key": key, "attempt": api.flaky[key]})

    async def slow(request: Request) -> Response:
        await log(request)
        await asyncio.sleep(int(request.path_params["ms"]) / 1000)
        return JSONResponse({"slept": int(request.path_params["ms"])})

    async def text(request: Request) -> Response:
        await log(request)
        return PlainTextResponse("hello, not json")

    async def echo(request: Request) -> Response:
        await log(request)
        body = await request.body()
        return JSONResponse(
            {
                "method": request.method,
                "query": dict(request.query_params),
                "x_key": request.headers.get("x-key"),
                "x_trace": request.headers.get("x-trace"),
                "body": body.decode() if body else None,
            }
        )

    async def sink(request: Request) -> Response:
        await log(request)
        api.sink_requests += 1
        key = request.headers.get("idempotency-key", "")
        api.sink.setdefault(key, (await request.body()).decode())
        return JSONResponse({"ok": True})

    return Starlette(
        routes=[
            Route("/users/{uid}", user),
            Route("/status/{code:int}", status, methods=["GET", "POST"]),
            Route("/flaky/{key}", flaky),
            Route("/slow/{ms:int}", slow),
            Route("/text", text),
            Route("/echo", echo, methods=["POST", "PUT", "GET"]),
            Route("/sink", sink, methods=["POST"]),
        ]
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_api() -> Iterator[HttpApi]:
    """Start the API on a free 127.0.0.1 port; stop it on exit."""
    port = _free_port()
    api = HttpApi(url=f"http://127.0.0.1:{port}")
    config = uvicorn.Config(_app(api), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    started = threading.Event()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the test HTTP API did not start")
        started.wait(0.02)
    try:
        yield api
    finally:
        server.should_exit = True
        thread.join(10)
