"""The REST API in process with the fake engine: shapes, errors, auth, limits, ingest, DLQ."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.config.settings import Settings
from service.main import create_app
from service.stores import Spool, open_stores
from tests.unit.service.fake_engine import FakeEngine

KEY = "unit-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
PIPELINE = [
    {"$source": {"connectionName": "in1"}},
    {"$addFields": {"x": 10.0, "y": 10, "z": {"b": 1, "a": 2}}},
]
DLQ = {"connectionName": "local", "db": "d", "coll": "dlq"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path, api_keys=[KEY], max_body_bytes=64 * 1024)
    app = create_app(settings, engine=FakeEngine(), stores=open_stores(data_dir=tmp_path))
    with TestClient(app, headers=AUTH) as test_client:
        test_client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
        yield test_client


def create(client: TestClient, name: str = "p1", **extra: Any) -> dict[str, Any]:
    response = client.post("/api/v1/processors", json={"name": name, "pipeline": PIPELINE, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == status and body["errorCode"] == code
    assert set(body) == {"error", "errorCode", "reason", "detail", "problems", "warnings"}
    return body


# --------------------------------------------------------------------------- processors


def test_create_returns_the_atlas_shape_and_keeps_json_fidelity(client: TestClient) -> None:
    body = create(client, options={"dlq": DLQ})
    assert set(body) >= {"_id", "name", "pipeline", "options", "state", "stats", "lastStateChange"}
    assert body["state"] == "CREATED" and body["options"] == {"dlq": DLQ}
    assert body["stats"]["status"] == "created" and body["stats"]["inputMessageCount"] == 0
    text = client.get("/api/v1/processors/p1").text
    assert '"x":10.0' in text and '"y":10' in text and '"z":{"b":1,"a":2}' in text


def test_list_pages_with_atlas_parameters(client: TestClient) -> None:
    for i in range(5):
        create(client, f"p{i}")
    page = client.get("/api/v1/processors", params={"itemsPerPage": 2, "pageNum": 2}).json()
    assert page["totalCount"] == 5 and [p["name"] for p in page["results"]] == ["p2", "p3"]
    error_of(client.get("/api/v1/processors", params={"itemsPerPage": 0}), 422, "INVALID_REQUEST")


def test_lifecycle_over_http(client: TestClient) -> None:
    create(client)
    assert client.post("/api/v1/processors/p1:start").json()["state"] == "STARTED"
    body = error_of(client.post("/api/v1/processors/p1:start"), 409, "INVALID_STATE_TRANSITION")
    assert body["problems"] == [
        {"code": "invalid_transition", "path": "/state", "message": body["detail"]}
    ]
    error_of(
        client.patch("/api/v1/processors/p1", json={"name": "x"}), 409, "INVALID_STATE_TRANSITION"
    )
    assert client.post("/api/v1/processors/p1:stop").json()["state"] == "STOPPED"
    fresh = client.post("/api/v1/processors/p1:start", json={"resumeFromCheckpoint": False})
    assert fresh.json()["state"] == "STARTED"
    assert client.delete("/api/v1/processors/p1").status_code == 204
    error_of(client.get("/api/v1/processors/p1"), 404, "PROCESSOR_NOT_FOUND")
    error_of(client.delete("/api/v1/processors/p1"), 404, "PROCESSOR_NOT_FOUND")


def test_invalid_pipelines_list_every_problem_with_warnings(client: TestClient) -> None:
    window = {
        "$tumblingWindow": {
            "interval": {"size": 0, "unit": "second"},
            "allowedLateness": {"size": 1, "unit": "second"},
            "pipeline": [{"$group": {"_id": None, "n": {"$sum": 1}}}],
        }
    }
    pipeline = [{"$source": {"connectionName": "in1"}}, window, {"$matchh": {}}]
    body = error_of(
        client.post("/api/v1/processors", json={"name": "p", "pipeline": pipeline}),
        422,
        "INVALID_PIPELINE",
    )
    paths = [p["path"] for p in body["problems"]]
    assert "/pipeline/2" in paths and any(
        p.startswith("/pipeline/1/$tumblingWindow/interval") for p in paths
    )


def test_request_bodies_are_validated_with_json_pointer_paths(client: TestClient) -> None:
    body = error_of(
        client.post("/api/v1/processors", json={"name": "../etc", "pipeline": [], "extra": 1}),
        422,
        "INVALID_REQUEST",
    )
    assert {p["path"] for p in body["problems"]} == {"/name", "/pipeline", "/extra"}
    error_of(
        client.post(
            "/api/v1/processors", content=b"{not json", headers={"Content-Type": "application/json"}
        ),
        422,
        "INVALID_REQUEST",
    )
    error_of(
        client.post(
            "/api/v1/processors", content=b"\xff\xfe", headers={"Content-Type": "application/json"}
        ),
        422,
        "INVALID_REQUEST",
    )


@pytest.mark.parametrize("name", ["..", "a.b", "a%2F..%2Fb", "x" * 65, "sp ace"])
def test_names_that_could_steer_a_path_are_refused(client: TestClient, name: str) -> None:
    response = client.get(f"/api/v1/processors/{name}")
    assert response.status_code in (404, 422)
    assert response.json()["errorCode"] in ("INVALID_REQUEST", "NOT_FOUND")


def test_stats_verbose_and_scale(client: TestClient) -> None:
    create(client)
    stats = client.get(
        "/api/v1/processors/p1/stats", params={"verbose": "true", "scale": 1024}
    ).json()
    assert stats["scaleFactor"] == 1024
    assert [op["name"] for op in stats["operatorStats"]] == ["SourceOperator", "AddFieldsOperator"]
    error_of(client.get("/api/v1/processors/p1/stats", params={"scale": 7}), 422, "INVALID_REQUEST")


# --------------------------------------------------------------------------- security and limits


def test_every_route_but_healthz_requires_a_key(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method in operations:
            url = path.replace("{name}", "p1").replace("{connectionName}", "in1")
            response = client.request(method.upper(), url, headers={"Authorization": ""})
            expected = 200 if path == "/healthz" else 401
            assert response.status_code == expected, (method, path)
    assert client.get("/healthz", headers={"Authorization": ""}).json()["status"] == "ok"


def test_bodies_over_the_limit_get_413(client: TestClient) -> None:
    big = b"x" * (64 * 1024 + 1)
    error_of(client.post("/api/v1/ingest/in1", content=big), 413, "PAYLOAD_TOO_LARGE")

    def chunks() -> Iterator[bytes]:
        for _ in range(80):
            yield b"y" * 1024

    error_of(client.post("/api/v1/ingest/in1", content=chunks()), 413, "PAYLOAD_TOO_LARGE")


def test_unknown_routes_and_methods_use_the_error_body(client: TestClient) -> None:
    error_of(client.get("/api/v1/nothing"), 404, "NOT_FOUND")
    error_of(client.put("/api/v1/processors"), 405, "METHOD_NOT_ALLOWED")


# --------------------------------------------------------------------------- connections


def test_connection_secrets_are_write_only(client: TestClient) -> None:
    kafka = {
        "name": "k1",
        "type": "Kafka",
        "bootstrapServers": "broker:9092",
        "authentication": {"mechanism": "PLAIN", "username": "u", "password": "hunter2"},
        "config": {"sasl.jaas.config": "secret stuff", "auto.offset.reset": "earliest"},
    }
    cluster = {"name": "c1", "type": "Cluster", "uri": "mongodb://user:pw@db.example:27017/x"}
    for body in (kafka, cluster):
        assert client.post("/api/v1/connections", json=body).status_code == 201
    listing = client.get("/api/v1/connections").text
    assert "hunter2" not in listing and "secret stuff" not in listing and ":pw@" not in listing
    assert client.get("/api/v1/connections/c1").json()["uri"] == "mongodb://user@db.example:27017/x"
    names = [c["name"] for c in client.get("/api/v1/connections").json()["results"]]
    assert names[:2] == ["sample_stream_solar", "local"]


def test_connections_in_use_and_built_in_ones_cannot_be_dropped(client: TestClient) -> None:
    create(client)
    error_of(client.delete("/api/v1/connections/in1"), 409, "CONNECTION_IN_USE")
    error_of(client.delete("/api/v1/connections/local"), 409, "CONNECTION_IN_USE")
    error_of(
        client.post("/api/v1/connections", json={"name": "local", "type": "HttpIngest"}),
        409,
        "CONNECTION_ALREADY_EXISTS",
    )
    error_of(
        client.post(
            "/api/v1/connections", json={"name": "f", "type": "File", "directory": "rel/../x"}
        ),
        422,
        "INVALID_REQUEST",
    )
    client.delete("/api/v1/processors/p1")
    assert client.delete("/api/v1/connections/in1").status_code == 204


# --------------------------------------------------------------------------- ingest


def spooled(tmp_path: Path, connection: str = "in1") -> list[bytes]:
    from pipeline_stages._connectors.sources.http_ingest import decode_record

    spool = Spool(tmp_path)
    return [decode_record(p)[1] for _, p in spool.read(connection, 1, spool.latest_seq(connection))]


def test_ingest_accepts_arrays_and_ndjson_and_counts_invalid_records(
    client: TestClient, tmp_path: Path
) -> None:
    body = b'[{"a": 1.0}, {"b":2},3 ]'
    array = client.post(
        "/api/v1/ingest/in1", content=body, headers={"Content-Type": "application/json"}
    )
    assert array.status_code == 202
    assert array.json() == {"accepted": 3, "invalid": 1, "firstSeq": 1, "lastSeq": 3}
    lines = b'{"c": 10.0}\r\n\nnot json\n{"d": [1, 2]}'
    ndjson = client.post(
        "/api/v1/ingest/in1", content=lines, headers={"Content-Type": "application/x-ndjson"}
    )
    assert ndjson.json() == {"accepted": 3, "invalid": 1, "firstSeq": 4, "lastSeq": 6}
    assert spooled(tmp_path) == [
        b'{"a": 1.0}',  # array elements are spooled as sent, like lines
        b'{"b":2}',
        b"3",
        b'{"c": 10.0}',
        b"not json",
        b'{"d": [1, 2]}',
    ]
    sniffed = client.post(
        "/api/v1/ingest/in1", content=b'[{"e": 1}]', headers={"Content-Type": "text/csv"}
    )
    assert sniffed.json()["accepted"] == 1 and spooled(tmp_path)[-1] == b'{"e": 1}'


def test_ingest_errors(client: TestClient) -> None:
    error_of(client.post("/api/v1/ingest/nowhere", json=[{}]), 404, "CONNECTION_NOT_FOUND")
    error_of(client.post("/api/v1/ingest/local", json=[{}]), 409, "CONNECTION_TYPE_MISMATCH")
    bad = client.post(
        "/api/v1/ingest/in1", content=b"[1,", headers={"Content-Type": "application/json"}
    )
    error_of(bad, 422, "INVALID_REQUEST")


# --------------------------------------------------------------------------- DLQ and sample


def seed_dlq(tmp_path: Path, processor: str, count: int) -> None:
    stores = open_stores(data_dir=tmp_path)
    docs = [
        {
            "_id": f"id{i}",
            "errInfo": {"reason": "late" if i % 2 else "bad"},
            "operatorName": "GroupOperator" if i % 2 else "AddFieldsOperator",
            "dlqTime": datetime(2024, 1, 1, 0, 0, i, tzinfo=UTC),
            "doc": {"i": i},
            "processorName": processor,
        }
        for i in range(count)
    ]
    stores.dlq("d", "dlq").upsert_many(processor, docs)
    stores.close()


def test_dlq_filters_sort_and_purge(client: TestClient, tmp_path: Path) -> None:
    create(client, options={"dlq": DLQ})
    seed_dlq(tmp_path, "p1", 6)
    page = client.get("/api/v1/processors/p1/dlq", params={"limit": 2, "skip": 1}).json()
    assert page["totalCount"] == 6 and [d["doc"]["i"] for d in page["results"]] == [1, 2]
    assert page["results"][0]["dlqTime"] == {"$date": "2024-01-01T00:00:01.000Z"}
    late = client.get("/api/v1/processors/p1/dlq", params={"reason": "late", "sort": "desc"}).json()
    assert [d["doc"]["i"] for d in late["results"]] == [5, 3, 1]
    window = {"from": "2024-01-01T00:00:02Z", "to": "2024-01-01T00:00:04Z"}
    assert client.get("/api/v1/processors/p1/dlq", params=window).json()["totalCount"] == 2
    mql = client.get(
        "/api/v1/processors/p1/dlq", params={"filter": json.dumps({"doc.i": {"$gte": 4}})}
    ).json()
    assert mql["totalCount"] == 2
    body = error_of(
        client.get("/api/v1/processors/p1/dlq", params={"filter": "{nope"}), 422, "INVALID_REQUEST"
    )
    assert body["problems"][0]["path"] == "/query/filter"
    error_of(
        client.get("/api/v1/processors/p1/dlq", params={"filter": '{"$where": "1"}'}),
        422,
        "INVALID_REQUEST",
    )
    purged = client.delete(
        "/api/v1/processors/p1/dlq", params={"operatorName": "GroupOperator"}
    ).json()
    assert purged == {"deletedCount": 3}
    assert client.get("/api/v1/processors/p1/dlq").json()["totalCount"] == 3


def test_dlq_of_a_processor_without_one_is_404(client: TestClient) -> None:
    create(client)
    error_of(client.get("/api/v1/processors/p1/dlq"), 404, "DLQ_NOT_CONFIGURED")


def test_sample_follows_with_a_cursor(client: TestClient) -> None:
    from service.manager.writers import KIND_DLQ, KIND_OUT

    create(client)
    buffer = client.app.state.services.manager.sample_buffer("p1")  # type: ignore[attr-defined]
    buffer.append(1, 0, [(KIND_OUT, '{"n": 1}'), (KIND_DLQ, '{"errInfo": {"reason": "r"}}')])
    first = client.get("/api/v1/processors/p1/sample").json()
    assert first["messages"] == [{"n": 1}, {"_dlqMessage": {"errInfo": {"reason": "r"}}}]
    buffer.append(1, 1, [(KIND_OUT, '{"n": 2}')])
    newer = client.get("/api/v1/processors/p1/sample", params={"after": first["cursorId"]}).json()
    assert newer["messages"] == [{"n": 2}] and newer["cursorId"] == "1.1.0"
    error_of(
        client.get("/api/v1/processors/p1/sample", params={"after": "x"}), 422, "INVALID_REQUEST"
    )


def test_metrics_are_prometheus_text(client: TestClient) -> None:
    create(client)
    client.post("/api/v1/ingest/in1", content=b'{"a": 1}\nbad\n')
    response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = response.text
    assert 'sluice_processor_input_messages_total{processor="p1"} 0' in text
    assert 'sluice_processor_state{processor="p1",state="CREATED"} 1' in text
    assert 'sluice_ingest_invalid_records_total{connection="in1"} 1' in text
    assert "# TYPE sluice_processor_watermark_lag_seconds gauge" in text
