"""`POST /connections/{name}:test` and `sluice connections test` against a real Kafka broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.cli.app import app
from service.cli.output import CliState
from service.config.settings import Settings
from service.main import create_app
from service.manager.connection_probe import probe_kafka
from service.stores import open_stores
from tests.kafka_broker import KafkaBroker
from tests.unit.service.fake_engine import FakeEngine

pytestmark = [pytest.mark.kafka]

KEY = "probe-test-key-0123456789"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path, api_keys=[KEY])
    application = create_app(settings, engine=FakeEngine(), stores=open_stores(data_dir=tmp_path))
    with TestClient(application, headers={"Authorization": f"Bearer {KEY}"}) as test_client:
        yield test_client


def sluice(client: TestClient, *args: str) -> Any:
    return CliRunner().invoke(app, list(args), obj=CliState(http=client))


def test_a_reachable_cluster_lists_its_topics(
    client: TestClient, kafka_broker: KafkaBroker
) -> None:
    topic = kafka_broker.create_topic(2)
    body = {"name": "k", "type": "Kafka", "bootstrapServers": kafka_broker.bootstrap}
    assert client.post("/api/v1/connections", json=body).status_code == 201
    answer = client.post("/api/v1/connections/k:test").json()
    assert answer["ok"] is True and answer["error"] is None
    assert topic in answer["topics"] and answer["brokers"]
    printed = sluice(client, "connections", "test", "k")
    assert printed.exit_code == 0, printed.output
    assert "reachable" in printed.stdout and topic in printed.stdout


def test_an_unreachable_cluster_says_what_to_check(client: TestClient) -> None:
    body = {"name": "nowhere", "type": "Kafka", "bootstrapServers": "127.0.0.1:1"}
    assert client.post("/api/v1/connections", json=body).status_code == 201
    answer = client.post("/api/v1/connections/nowhere:test", params={"timeout": 2}).json()
    assert answer["ok"] is False and answer["topics"] == []
    assert "127.0.0.1:1" in answer["error"]["message"]
    assert "bootstrapServers" in answer["error"]["message"]
    printed = sluice(client, "--json", "connections", "test", "nowhere", "--timeout", "2")
    assert printed.exit_code == 1 and json.loads(printed.stdout)["ok"] is False


def test_settings_the_client_refuses_are_named_at_creation(client: TestClient) -> None:
    body: dict[str, Any] = {"name": "typo", "type": "Kafka", "bootstrapServers": "127.0.0.1:1"}
    for key, value in [("socket.timeout.msec", "1000"), ("socket.timeout.ms", "soon")]:
        refused = client.post("/api/v1/connections", json={**body, "config": {key: value}})
        assert refused.status_code == 422, refused.text
        (problem,) = refused.json()["problems"]
        assert problem["path"] == f"/config/{key}" and key in problem["message"]
    # Settings that need each other are checked together: SASL without credentials.
    sasl = {**body, "security": {"protocol": "SASL_SSL"}, "config": {"sasl.mechanism": "PLAIN"}}
    refused = client.post("/api/v1/connections", json=sasl)
    assert (
        refused.status_code == 422 and "sasl.username" in refused.json()["problems"][0]["message"]
    )
    assert client.get("/api/v1/connections/typo").status_code == 404  # nothing was stored
    good = {**body, "config": {"socket.timeout.ms": 1000, "enable.idempotence": True}}
    assert client.post("/api/v1/connections", json=good).status_code == 201


def test_a_stored_setting_the_client_refuses_is_a_failed_check_not_a_500() -> None:
    # A connection stored before creation checked its settings reaches the check as it is.
    config = {"bootstrapServers": "127.0.0.1:1", "config": {"socket.timeout.msec": "1000"}}
    answer = probe_kafka(config, timeout_s=2)
    assert answer["ok"] is False and answer["error"]["code"] == "_INVALID_ARG"
    assert "socket.timeout.msec" in answer["error"]["message"]


def test_only_kafka_connections_are_tested(client: TestClient) -> None:
    client.post("/api/v1/connections", json={"name": "in", "type": "HttpIngest"})
    mismatch = client.post("/api/v1/connections/in:test")
    assert mismatch.status_code == 409
    assert mismatch.json()["errorCode"] == "CONNECTION_TYPE_MISMATCH"
    assert client.post("/api/v1/connections/missing:test").status_code == 404
    bad = client.post("/api/v1/connections/in:test", params={"timeout": 0})
    assert bad.status_code == 422 and bad.json()["problems"][0]["path"] == "/query/timeout"
    assert (
        client.post("/api/v1/connections/in:test", headers={"Authorization": ""}).status_code == 401
    )
