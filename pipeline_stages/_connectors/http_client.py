"""Requests to an `Https` connection: bounded concurrency, timeouts, retries with backoff.

Used by `$https` in the middle of a pipeline (`_enrichment.https_runner`) and as the sink
(`sinks/https_writer`). A partition's requests run on one asyncio loop with one `httpx`
client (a connection pool) and at most `concurrency` requests in flight, so a slow API costs
the slowest request per wave, not the sum of all. A 5xx, a 429 or a timeout is retried up to
`max_retries` times, waiting `backoff_ms * 2**attempt` (a 429's `Retry-After`, when given, if
longer); any other status is final. Every request ends in an `Outcome` (never an exception):
the caller decides between the DLQ, ignoring and failing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

#: How much of an error response's body a DLQ record keeps.
BODY_LIMIT = 1024
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class HttpPolicy:
    """Timeouts, retries and the concurrency bound of one stage."""

    connect_timeout_s: float = 10
    request_timeout_s: float = 30
    max_retries: int = 3
    backoff_ms: int = 200
    concurrency: int = 16


@dataclass(frozen=True)
class HttpRequest:
    """One request: method, full URL, query parameters, headers and an optional JSON body."""

    method: str
    url: str
    params: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: str | None = None


@dataclass(frozen=True)
class Outcome:
    """How a request ended: a status and body, or a transport error; timings in ms."""

    status: int | None
    body: str
    error: str | None
    attempts: int
    elapsed_ms: float

    @property
    def ok(self) -> bool:
        """A 2xx response."""
        return self.status is not None and 200 <= self.status < 300

    def describe(self) -> str:
        """The failure as a DLQ reason fragment: status or error, and the truncated body."""
        if self.status is None:
            return f"request failed after {self.attempts} attempt(s): {self.error}"
        body = self.body if len(self.body) <= BODY_LIMIT else self.body[:BODY_LIMIT] + "…"
        return (
            f"request failed with status {self.status} after {self.attempts} attempt(s); "
            f"response body: {body}"
        )


def join_url(base: str, path: str | None) -> str:
    """The connection's `url` with the stage's `path` appended (one `/` between them)."""
    if not path:
        return base
    return base.rstrip("/") + "/" + path.lstrip("/")


def send_all(requests: Sequence[HttpRequest | None], policy: HttpPolicy) -> list[Outcome | None]:
    """Send every request (None: skipped), concurrently, and return their outcomes in order."""
    if not any(r is not None for r in requests):
        return [None] * len(requests)
    return asyncio.run(_send_all(requests, policy))


async def _send_all(
    requests: Sequence[HttpRequest | None], policy: HttpPolicy
) -> list[Outcome | None]:
    # httpx is imported where requests are sent, not with the module: every sink task's
    # Python worker imports this module (through the sink dispatch), and httpx brings its
    # CLI's rich and pygments, ~12 % of a File sink's worker time in a profile (RESULTS.md).
    import httpx

    timeout = httpx.Timeout(policy.request_timeout_s, connect=policy.connect_timeout_s)
    limits = httpx.Limits(max_connections=policy.concurrency)
    gate = asyncio.Semaphore(policy.concurrency)
    async with httpx.AsyncClient(timeout=timeout, limits=limits) as client:

        async def one(request: HttpRequest | None) -> Outcome | None:
            if request is None:
                return None
            async with gate:
                return await _send(client, request, policy)

        return list(await asyncio.gather(*(one(r) for r in requests)))


async def _send(client: httpx.AsyncClient, request: HttpRequest, policy: HttpPolicy) -> Outcome:
    started = time.perf_counter()
    attempt = 0
    while True:
        attempt += 1
        status, body, error, wait_s = await _attempt(client, request)
        retry = (status in RETRY_STATUSES or status is None) and attempt <= policy.max_retries
        if not retry:
            elapsed = (time.perf_counter() - started) * 1000
            return Outcome(status, body, error, attempt, elapsed)
        backoff = policy.backoff_ms / 1000 * 2 ** (attempt - 1)
        await asyncio.sleep(max(backoff, wait_s))


async def _attempt(
    client: httpx.AsyncClient, request: HttpRequest
) -> tuple[int | None, str, str | None, float]:
    import httpx  # loaded by `_send_all` already (see there)

    try:
        response = await client.request(
            request.method,
            request.url,
            params=dict(request.params) or None,
            headers=dict(request.headers),
            content=None if request.body is None else request.body.encode("utf-8"),
        )
    except httpx.TimeoutException as exc:
        return None, "", f"timeout ({type(exc).__name__})", 0.0
    except httpx.HTTPError as exc:
        return None, "", f"{type(exc).__name__}: {exc}", 0.0
    return response.status_code, response.text, None, _retry_after(response)


def _retry_after(response: httpx.Response) -> float:
    value = response.headers.get("retry-after", "")
    try:
        return min(float(value), 60.0)
    except ValueError:
        return 0.0


def parse_response(body: str, *, parse_json_strings: bool) -> Any:
    """The response body as a value: JSON (strings holding JSON parsed too when asked).

    Raises:
        ValueError: The body is not JSON.
    """
    if not body.strip():
        return None
    value = json.loads(body)
    return _parse_strings(value) if parse_json_strings else value


def _parse_strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _parse_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_parse_strings(v) for v in value]
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return _parse_strings(json.loads(value))
        except ValueError:
            return value
    return value
