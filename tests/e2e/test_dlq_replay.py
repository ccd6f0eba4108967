"""End to end: DLQ replay into a started processor on the real service, across a restart.

A processor dead-letters a division by zero; its DLQ record is replayed with the real CLI into
a corrections processor (its own HttpIngest input), whose output then shows the replayed
document. Retrying the replay, before and after a SIGTERM restart, replays nothing again.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._connectors.sources.spool import Spool
from tests.e2e.service_process import ServiceProcess, poll

pytestmark = [pytest.mark.spark, pytest.mark.slow]

DLQ = {"connectionName": "local", "db": "e2e", "coll": "dlq"}
STRICT = [
    {"$source": {"connectionName": "raw_in"}},
    {"$addFields": {"ratio": {"$divide": ["$a", "$b"]}}},
    {"$project": {"_id": 0, "id": 1, "ratio": 1}},
]
CORRECTIONS = [
    {"$source": {"connectionName": "fixed_in"}},
    {
        "$addFields": {
            "ratio": {"$cond": [{"$eq": ["$b", 0]}, None, {"$divide": ["$a", "$b"]}]},
            "corrected": True,
        }
    },
    {"$project": {"_id": 0, "id": 1, "ratio": 1, "corrected": 1}},
]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ServiceProcess]:
    running = ServiceProcess(tmp_path / "data").start()
    yield running
    running.cleanup()


def outputs(client: Any, name: str) -> list[dict[str, Any]]:
    body = client.get(f"/api/v1/processors/{name}/sample", params={"limit": 1000}).json()
    return [m for m in body["messages"] if "_dlqMessage" not in m]


def test_a_dead_lettered_document_replays_into_a_started_processor_once(
    service: ServiceProcess,
) -> None:
    with service.http() as client:
        for name in ("raw_in", "fixed_in"):
            created = client.post("/api/v1/connections", json={"name": name, "type": "HttpIngest"})
            assert created.status_code == 201, created.text
        for name, pipeline in (("strict", STRICT), ("corrections", CORRECTIONS)):
            body = {"name": name, "pipeline": pipeline, "options": {"dlq": DLQ}}
            assert client.post("/api/v1/processors", json=body).status_code == 201
            assert client.post(f"/api/v1/processors/{name}:start").json()["state"] == "STARTED"
        client.post(
            "/api/v1/ingest/raw_in", json=[{"id": 1, "a": 6, "b": 3}, {"id": 2, "a": 7, "b": 0}]
        )
        poll(
            lambda: client.get("/api/v1/processors/strict/dlq").json()["totalCount"] == 1 or None,
            timeout=180,
            message="the division by zero never reached the DLQ",
        )

        dry = service.cli(
            "--json", "dlq", "replay", "strict", "--to-processor", "corrections", "--dry-run"
        )
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout) == {"replayed": 1, "skipped": 0, "notReplayable": 0}
        done = service.cli(
            "--json",
            "dlq",
            "replay",
            "strict",
            "--to-processor",
            "corrections",
            "--reason",
            "DIVIDE",
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == {"replayed": 1, "skipped": 0, "notReplayable": 0}
        arrived = poll(
            lambda: outputs(client, "corrections") or None,
            timeout=180,
            message="the replayed document never came out of the corrections processor",
        )
        assert arrived == [{"id": 2, "ratio": None, "corrected": True}]

        retry = {"target": {"processor": "corrections"}}
        again = client.post("/api/v1/processors/strict/dlq:replay", json=retry).json()
        assert again == {"replayed": 0, "skipped": 1, "notReplayable": 0}
        [record] = client.get("/api/v1/processors/strict/dlq").json()["results"]
        assert record["replayedTo"] == ["processor:corrections"]

    assert service.stop() in (0, -signal.SIGTERM)
    restarted = ServiceProcess(service.data_dir).start()
    try:
        with restarted.http() as client:
            again = client.post("/api/v1/processors/strict/dlq:replay", json=retry).json()
            assert again == {"replayed": 0, "skipped": 1, "notReplayable": 0}
    finally:
        restarted.cleanup()
    spool = Spool(service.data_dir)
    assert spool.latest_seq("fixed_in") == 1  # written once, before and after the restart
