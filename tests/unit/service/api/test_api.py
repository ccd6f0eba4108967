"""The REST API in process with the fake engine: shapes, errors, auth, limits, ingest, DLQ."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.stores import Spool, open_stores
from tests.unit.service.api.app_client import api_client

PIPELINE = [
    {"$source": {"connectionName": "in1"}},
    {"$addFields": {"x": 10.0, "y": 10, "z": {"b": 1, "a": 2}}},
]
DLQ = {"connectionName": "local", "db": "d", "coll": "dlq"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with api_client(tmp_path, max_body_bytes=64 * 1024) as test_client:
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
        "config": {"ssl.key.password": "secret stuff", "auto.offset.reset": "earliest"},
    }
    cluster = {"name": "c1", "type": "Cluster", "uri": "mongodb://user:pw@db.example:27017/x"}
    for body in (kafka, cluster):
        assert client.post("/api/v1/connections", json=body).status_code == 201
    listing = client.get("/api/v1/connections").text
    assert "hunter2" not in listing and "secret stuff" not in listing and ":pw@" not in listing
    assert client.get("/api/v1/connections/c1").json()["uri"] == "mongodb://user@db.example:27017/x"
    names = [c["name"] for c in client.get("/api/v1/connections").json()["results"]]
    assert names[:2] == ["sample_stream_solar", "local"]


def test_https_connection_headers_that_carry_credentials_are_write_only(
    client: TestClient,
) -> None:
    body = {
        "name": "api",
        "type": "Https",
        "url": "https://api.example.com/v1",
        "headers": {"Authorization": "Bearer s3cr3t", "X-Api-Key": "k3y", "X-Team": "ops"},
    }
    assert client.post("/api/v1/connections", json=body).status_code == 201
    shown = client.get("/api/v1/connections/api").json()
    assert shown["url"] == "https://api.example.com/v1"
    assert shown["headers"] == {"X-Team": "ops"}
    assert "s3cr3t" not in client.get("/api/v1/connections").text
    for bad in ({**body, "name": "b1", "url": "ftp://x"}, {**body, "name": "b2", "url": "http://"}):
        error_of(client.post("/api/v1/connections", json=bad), 422, "INVALID_REQUEST")


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


# --------------------------------------------------------------------------- HTTP details


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("PUT", "/api/v1/processors/p1", "GET, PATCH, DELETE"),
        ("PATCH", "/api/v1/processors/p1:start", "POST"),
        ("GET", "/api/v1/processors/p1:stop", "POST"),
        ("DELETE", "/api/v1/processors/p1:start", "POST"),
        ("PUT", "/api/v1/processors", "GET, POST"),
        ("POST", "/api/v1/processors/p1/dlq", "GET, DELETE"),
        ("PUT", "/api/v1/ingest/in1", "POST"),
        ("POST", "/healthz", "GET"),
    ],
)
def test_405_names_every_allowed_method(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    create(client)
    response = client.request(method, path)
    body = error_of(response, 405, "METHOD_NOT_ALLOWED")
    assert response.headers["allow"] == allowed
    assert body["detail"] == f"{method} is not allowed here; use {allowed}"


@pytest.mark.parametrize("value", ["0.5", "0", "1700000000", "-1", "1e9", "yesterday"])
def test_dlq_time_bounds_take_iso_8601_text_only(client: TestClient, value: str) -> None:
    create(client, options={"dlq": DLQ})
    for name in ("from", "to"):
        body = error_of(
            client.get("/api/v1/processors/p1/dlq", params={name: value}), 422, "INVALID_REQUEST"
        )
        assert [p["path"] for p in body["problems"]] == [f"/query/{name}"]
        assert "ISO-8601" in body["problems"][0]["message"] or value == "yesterday"
    fine = client.get("/api/v1/processors/p1/dlq", params={"to": "2024-01-01T00:00:00Z"})
    assert fine.status_code == 200


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(b"", None), (b"", "application/json"), (b" \r\n\t", "application/x-ndjson"), (b"\n\n", None)],
)
def test_an_ingest_body_without_records_is_refused(
    client: TestClient, body: bytes, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    refused = error_of(
        client.post("/api/v1/ingest/in1", content=body, headers=headers), 422, "INVALID_REQUEST"
    )
    assert refused["problems"][0]["code"] == "empty_body"
    assert "holds no record" in refused["detail"]


def test_deeply_nested_json_bodies_are_split_not_refused(
    client: TestClient, tmp_path: Path
) -> None:
    array = b"[" * 990 + b"]" * 990  # one record, an array nested 989 deep
    deep_doc = b'[{"a": ' + b"[" * 988 + b"]" * 988 + b"}]"
    too_deep = b'[{"a": ' + b"[" * 1500 + b"]" * 1500 + b"}, {}]"
    results = [
        client.post("/api/v1/ingest/in1", content=body, headers={"Content-Type": ct}).json()
        for body, ct in [
            (array, "application/json"),
            (array, "text/csv"),
            (deep_doc, "application/json"),
            (too_deep, "application/json"),
        ]  # fmt: skip
    ]
    assert [(r["accepted"], r["invalid"]) for r in results] == [(1, 1), (1, 1), (1, 0), (2, 1)]
    assert spooled(tmp_path)[-2] == b'{"a": ' + b"[" * 1500 + b"]" * 1500 + b"}"


def test_invalid_counts_every_record_the_pipeline_will_dead_letter(
    client: TestClient, tmp_path: Path
) -> None:
    lines = [
        b'{"ok": 1}',
        b'{"a": NaN}',
        b'{"a": Infinity}',
        b'{"a": 1, "a": 2}',
        b'{"a": "\\ud800"}',
        b'{"a": "\xff"}',
        b'{"t": {"$date": "garbage"}}',
        b'{"t": {"$date": {"$numberLong": "99999999999999999999"}}}',
        b'{"a": 1e400}',
        b'{"$date": "2024-01-01T00:00:00Z"}',
        b'{"a": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"ok": 2}',
    ]
    ndjson = client.post(
        "/api/v1/ingest/in1",
        content=b"\n".join(lines),
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert ndjson.json()["accepted"] == 12 and ndjson.json()["invalid"] == 10
    array = b"[" + b",".join(line for line in lines if b"\xff" not in line) + b"]"
    as_json = client.post(
        "/api/v1/ingest/in1", content=array, headers={"Content-Type": "application/json"}
    )
    assert as_json.status_code == 202, as_json.text  # a lone surrogate once made this a 500
    assert as_json.json()["accepted"] == 11 and as_json.json()["invalid"] == 9
    assert spooled(tmp_path)[-8:-6] == [b'{"a": 1, "a": 2}', b'{"a": "\\ud800"}']


def test_emit_to_kafka_is_refused_at_create_without_the_kafka_client(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    kafka = {"name": "k1", "type": "Kafka", "bootstrapServers": "broker:9092"}
    assert client.post("/api/v1/connections", json=kafka).status_code == 201
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    pipeline = [
        {"$source": {"connectionName": "in1"}},
        {"$emit": {"connectionName": "k1", "topic": "t"}},
    ]
    body = error_of(
        client.post("/api/v1/processors", json={"name": "pk", "pipeline": pipeline}),
        422,
        "INVALID_PIPELINE",
    )
    (problem,) = body["problems"]
    assert problem["path"] == "/pipeline/1/$emit/connectionName"
    assert problem["code"] == "unsupported_option" and "confluent-kafka" in problem["message"]


@pytest.mark.parametrize(
    ("into", "path", "message"),
    [
        ({"db": "app", "coll": "a/../b"}, "/pipeline/1/$merge/into/coll", "it holds '/'"),
        ({"db": "a.b", "coll": "x"}, "/pipeline/1/$merge/into/db", "it holds '.'"),
        ({"db": "app", "coll": "system.x"}, "/pipeline/1/$merge/into/coll", "'system.' names"),
        ({"db": "a$", "coll": "$c"}, "/pipeline/1/$merge/into/db", "it holds '$'"),
    ],
)
def test_literal_target_names_are_checked_at_create(
    client: TestClient, into: dict[str, str], path: str, message: str
) -> None:
    pipeline = [
        {"$source": {"connectionName": "in1"}},
        {"$merge": {"into": {"connectionName": "local", **into}}},
    ]
    body = error_of(
        client.post("/api/v1/processors", json={"name": "pm", "pipeline": pipeline}),
        422,
        "INVALID_PIPELINE",
    )
    assert [(p["path"], message in p["message"]) for p in body["problems"]] == [(path, True)]
