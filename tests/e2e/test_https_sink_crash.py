"""`$https` as the sink survives a `kill -9` of the service and its JVM: after a restart the
API has received every output, and each under one `Idempotency-Key` (a replayed micro-batch
sends the same key again, which the API deduplicates).

The API is the test's own uvicorn app on 127.0.0.1 (`tests.integration.http_api`): it keeps
the first body per key and counts every request. The sink's operator stats count each output
once, however many times a replay sent it.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.service_process import ServiceProcess, poll
from tests.integration.http_api import HttpApi, running_api

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PIPELINE = [
    {"$source": {"connectionName": "orders"}},
    {"$set": {"total": {"$multiply": ["$n", 10]}}},
    {"$https": {"connectionName": "api", "path": "/sink", "method": "POST"}},
]


def post(service: ServiceProcess, numbers: range) -> None:
    body = "\n".join(json.dumps({"n": n}) for n in numbers)
    with service.http() as client:
        response = client.post(
            "/api/v1/ingest/orders",
            content=body.encode(),
            headers={"Content-Type": "application/x-ndjson"},
        )
    assert response.status_code == 202, response.text


def delivered(api: HttpApi) -> list[int]:
    return sorted(json.loads(text)["n"] for text in list(api.sink.values()))


def _https_stats(service: ServiceProcess, *, at_least: int) -> dict[str, Any] | None:
    """The verbose stats' `HttpsOperator` entry once it has counted `at_least` documents."""
    with service.http() as client:
        body = client.get("/api/v1/processors/hooks/stats", params={"verbose": "true"}).json()
    entry = {o["name"]: o for o in body.get("operatorStats") or []}.get("HttpsOperator")
    return entry if entry and entry.get("inputMessageCount", 0) >= at_least else None


def test_each_output_once_per_key_across_kill9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_api() as api:
        service = ServiceProcess(data).start()
        try:
            with service.http() as client:
                for body in (
                    {"name": "orders", "type": "HttpIngest"},
                    {"name": "api", "type": "Https", "url": api.url},
                ):
                    created = client.post("/api/v1/connections", json=body)
                    assert created.status_code == 201, created.text
                created = client.post(
                    "/api/v1/processors", json={"name": "hooks", "pipeline": PIPELINE}
                )
                assert created.status_code == 201, created.text
                started = client.post("/api/v1/processors/hooks:start")
                assert started.json()["state"] == "STARTED", started.text
            post(service, range(0, 30))
            poll(lambda: len(api.sink) >= 5, timeout=300, message="no output reached the API")
            # kill -9 the service and its Spark JVM (one process group) in the middle.
            assert service.proc is not None
            os.killpg(service.proc.pid, signal.SIGKILL)
            service.proc.wait(timeout=30)
            service = ServiceProcess(data).start()
            post(service, range(30, 60))
            poll(
                lambda: len(api.sink) >= 60,
                timeout=300,
                message=f"not every output reached the API: {delivered(api)}",
            )
            assert delivered(api) == list(range(60))
            assert len(api.sink) == 60  # one key per output, replays included
            assert api.sink_requests >= 60
            bodies = {key: json.loads(text) for key, text in api.sink.items()}
            assert all(doc["total"] == doc["n"] * 10 for doc in bodies.values())
            # The sink's operator stats count each output once, the replayed batch included
            # (recorded with the batch it counts, before Spark commits it).
            https = poll(
                lambda: _https_stats(service, at_least=60),
                timeout=120,
                message="the sink's operator stats did not reach 60",
            )
            assert (https["inputMessageCount"], https["outputMessageCount"]) == (60, 60)
            assert https["dlqMessageCount"] == 0
            assert https["latencyMs"]["samples"] == 60
            assert https["latencyMs"]["p50"] <= https["latencyMs"]["p99"]
        finally:
            service.cleanup()
