"""`POST /processors/{name}/dlq:replay` in process: targets, marks, idempotency, restarts, 422s."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline_stages._connectors.sources.http_ingest import decode_record
from service.manager import replay
from service.stores import Spool, open_stores
from tests.unit.service.api.app_client import api_client

DLQ = {"connectionName": "local", "db": "d", "coll": "dlq"}
ROUTE = "/api/v1/processors/p1/dlq:replay"


def _app(tmp_path: Path) -> TestClient:
    return api_client(tmp_path)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with _app(tmp_path) as test_client:
        for name in ("in1", "in2"):
            test_client.post("/api/v1/connections", json={"name": name, "type": "HttpIngest"})
        test_client.post("/api/v1/connections", json={"name": "s", "type": "Sample"})
        for name, source in (("p1", "in1"), ("p2", "in2"), ("ps", "s")):
            body = {"name": name, "pipeline": [{"$source": {"connectionName": source}}]}
            if name == "p1":
                body["options"] = {"dlq": DLQ}
            assert test_client.post("/api/v1/processors", json=body).status_code == 201
        yield test_client


def seed(tmp_path: Path, count: int, **extra: dict[str, Any]) -> None:
    stores = open_stores(data_dir=tmp_path)
    docs = [
        {
            "_id": f"id{i:04d}",
            "errInfo": {"reason": "Input document arrived late." if i % 2 else "bad value"},
            "operatorName": "GroupOperator" if i % 2 else "AddFieldsOperator",
            "dlqTime": datetime(2024, 1, 1, 0, 0, i % 60, i * 1000 % 1_000_000, tzinfo=UTC),
            "doc": {"i": i},
            "processorName": "p1",
            **extra.get(str(i), {}),
        }
        for i in range(count)
    ]
    for doc in docs:
        if "docText" in doc:  # a document the writer could only keep as text has no `doc`
            del doc["doc"]
    stores.dlq("d", "dlq").upsert_many("p1", docs)
    stores.close()


def spooled(tmp_path: Path, connection: str) -> list[dict[str, Any]]:
    spool = Spool(tmp_path)
    end = spool.latest_seq(connection)
    return (
        [json.loads(decode_record(p)[1]) for _, p in spool.read(connection, 1, end)] if end else []
    )


def dlq(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    page = client.get("/api/v1/processors/p1/dlq", params={"limit": 1000, **params})
    assert page.status_code == 200, page.text
    results: list[dict[str, Any]] = page.json()["results"]
    return results


def test_replay_into_a_processor_writes_its_input_once(client: TestClient, tmp_path: Path) -> None:
    seed(tmp_path, 6)
    body = {"target": {"processor": "p2"}}
    first = client.post(ROUTE, json=body)
    assert first.status_code == 200, first.text
    assert first.json() == {"replayed": 6, "skipped": 0, "notReplayable": 0}
    assert spooled(tmp_path, "in2") == [{"i": i} for i in range(6)]
    retried = client.post(ROUTE, json=body).json()
    assert retried == {"replayed": 0, "skipped": 6, "notReplayable": 0}
    assert len(spooled(tmp_path, "in2")) == 6
    marked = dlq(client, replayedTo="processor:p2")
    assert len(marked) == 6 and all(d["replayedTo"] == ["processor:p2"] for d in marked)
    assert all(set(d["replayedAt"]) == {"$date"} for d in marked)


def test_filters_select_and_each_target_counts_apart(client: TestClient, tmp_path: Path) -> None:
    seed(tmp_path, 6)
    late = {"reason": "ARRIVED LATE", "target": {"connectionName": "in1"}}
    assert client.post(ROUTE, json=late).json()["replayed"] == 3
    assert spooled(tmp_path, "in1") == [{"i": 1}, {"i": 3}, {"i": 5}]
    everything = client.post(ROUTE, json={"target": {"connectionName": "in1"}}).json()
    assert everything == {"replayed": 3, "skipped": 3, "notReplayable": 0}
    other = {"operatorName": "GroupOperator", "filter": {"doc.i": {"$gte": 3}}}
    to_p2 = client.post(ROUTE, json={**other, "target": {"processor": "p2"}}).json()
    assert to_p2["replayed"] == 2 and spooled(tmp_path, "in2") == [{"i": 3}, {"i": 5}]
    assert [d["doc"]["i"] for d in dlq(client, replayed="false")] == []
    assert [d["doc"]["i"] for d in dlq(client, replayedTo="processor:p2")] == [3, 5]
    window = {"from": "2024-01-01T00:00:02Z", "to": "2024-01-01T00:00:04Z"}
    to_p2 = client.post(ROUTE, json={**window, "target": {"processor": "p2"}}).json()
    assert to_p2 == {"replayed": 1, "skipped": 1, "notReplayable": 0}


def test_a_dry_run_counts_and_writes_nothing(client: TestClient, tmp_path: Path) -> None:
    seed(tmp_path, 4, **{"2": {"doc": "not an object"}})
    dry = client.post(ROUTE, json={"target": {"processor": "p2"}, "dryRun": True}).json()
    assert dry == {"replayed": 3, "skipped": 0, "notReplayable": 1}
    assert spooled(tmp_path, "in2") == [] and dlq(client, replayed="true") == []
    real = client.post(ROUTE, json={"target": {"processor": "p2"}}).json()
    assert real == dry


def test_documents_are_replayed_as_extended_json(client: TestClient, tmp_path: Path) -> None:
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    extra = {
        "0": {"doc": {"at": when, "n": 1.5}},
        "1": {"docText": '{"raw": 1}'},
        "2": {"docText": "not json"},
    }
    seed(tmp_path, 3, **extra)
    result = client.post(ROUTE, json={"target": {"processor": "p2"}}).json()
    assert result == {"replayed": 2, "skipped": 0, "notReplayable": 1}
    assert spooled(tmp_path, "in2") == [
        {"at": {"$date": "2024-05-01T12:00:00.000Z"}, "n": 1.5},
        {"raw": 1},
    ]
    [unreplayable] = dlq(client, replayed="false")
    assert unreplayable["docText"] == "not json"


def test_large_dlqs_stream_in_chunks(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay, "CHUNK", 7)
    bad = {str(i): {"doc": [i]} for i in range(0, 50, 9)}  # unreplayable, spread out
    seed(tmp_path, 50, **bad)
    result = client.post(ROUTE, json={"target": {"processor": "p2"}}).json()
    assert result == {"replayed": 50 - len(bad), "skipped": 0, "notReplayable": len(bad)}
    expected = [{"i": i} for i in range(50) if str(i) not in bad]
    assert sorted(spooled(tmp_path, "in2"), key=lambda d: d["i"]) == expected
    again = client.post(ROUTE, json={"target": {"processor": "p2"}}).json()
    assert again == {"replayed": 0, "skipped": 50 - len(bad), "notReplayable": len(bad)}


def test_replay_is_idempotent_across_a_restart(tmp_path: Path) -> None:
    with _app(tmp_path) as first:
        first.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
        body = {"name": "p1", "pipeline": [{"$source": {"connectionName": "in1"}}]}
        first.post("/api/v1/processors", json={**body, "options": {"dlq": DLQ}})
        seed(tmp_path, 5)
        assert first.post(ROUTE, json={"target": {"processor": "p1"}}).json()["replayed"] == 5
    with _app(tmp_path) as second:
        again = second.post(ROUTE, json={"target": {"processor": "p1"}}).json()
        assert again == {"replayed": 0, "skipped": 5, "notReplayable": 0}
    assert len(spooled(tmp_path, "in1")) == 5


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"target": {"processor": "nope"}}, "/target"),
        ({"target": {"processor": "ps"}}, "/target"),  # reads a Sample connection
        ({"target": {"connectionName": "s"}}, "/target"),
        ({"target": {"connectionName": "local"}}, "/target"),
        ({"target": {"connectionName": "nope"}}, "/target"),
        ({"target": {"processor": "p2", "connectionName": "in1"}}, "/target"),
        ({"target": {}}, "/target"),
        ({}, "/target"),
        ({"target": {"processor": "p2"}, "dryRun": "yes"}, "/dryRun"),
        ({"target": {"processor": "p2"}, "from": 5}, "/from"),
        ({"target": {"processor": "p2"}, "filter": "{}"}, "/filter"),
        ({"target": {"processor": "p2"}, "filter": {"$where": "1"}}, "/query/filter"),
        ({"target": {"processor": "p2/x"}}, "/target/processor"),
        ({"target": {"processor": "p2"}, "extra": 1}, "/extra"),
    ],
)
def test_bad_requests_are_422_with_a_path(
    client: TestClient, tmp_path: Path, body: dict[str, Any], path: str
) -> None:
    seed(tmp_path, 2)
    response = client.post(ROUTE, json=body)
    assert response.status_code == 422, response.text
    assert path in [p["path"] for p in response.json()["problems"]]
    assert spooled(tmp_path, "in2") == []


def test_errors_about_the_processor_and_the_key(client: TestClient) -> None:
    body = {"target": {"processor": "p2"}}
    assert client.post(ROUTE, json=body, headers={"Authorization": ""}).status_code == 401
    missing = client.post("/api/v1/processors/nope/dlq:replay", json=body)
    assert missing.status_code == 404 and missing.json()["errorCode"] == "PROCESSOR_NOT_FOUND"
    no_dlq = client.post("/api/v1/processors/p2/dlq:replay", json=body)
    assert no_dlq.status_code == 404 and no_dlq.json()["errorCode"] == "DLQ_NOT_CONFIGURED"
