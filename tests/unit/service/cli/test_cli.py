"""The `sluice` client commands over an injected HTTP client (TestClient or MockTransport)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from typer.testing import CliRunner

from service.cli.app import app
from service.cli.client import SluiceClient, resolve_target
from service.cli.output import CliState
from service.cli.processors import stats_view
from service.config.settings import Settings
from service.main import create_app
from service.stores import open_stores
from tests.unit.service.fake_engine import FakeEngine

KEY = "cli-test-key-0123456789"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path, api_keys=[KEY])
    application = create_app(settings, engine=FakeEngine(), stores=open_stores(data_dir=tmp_path))
    with TestClient(application, headers={"Authorization": f"Bearer {KEY}"}) as client:
        yield client


def sluice(api: httpx.Client, *args: str, stdin: str | None = None) -> Any:
    return CliRunner().invoke(app, list(args), obj=CliState(http=api), input=stdin)


def test_processor_commands_round_trip(api: TestClient, tmp_path: Path) -> None:
    assert sluice(api, "connections", "create", "in1", "--type", "HttpIngest").exit_code == 0
    pipeline = tmp_path / "p.json"
    pipeline.write_text(
        json.dumps(
            {
                "pipeline": [{"$source": {"connectionName": "in1"}}],
                "options": {"dlq": {"connectionName": "local", "db": "d", "coll": "c"}},
            }
        )
    )
    created = sluice(api, "--json", "processors", "create", "p1", str(pipeline), "--start")
    assert created.exit_code == 0, created.output
    assert json.loads(created.stdout)["state"] == "STARTED"
    assert json.loads(created.stdout)["options"]["dlq"]["coll"] == "c"  # taken from the file
    listed = sluice(api, "processors", "list")
    assert "p1" in listed.stdout and "STARTED" in listed.stdout
    assert (
        json.loads(sluice(api, "processors", "stats", "p1", "--json").stdout)["status"] == "running"
    )
    assert sluice(api, "processors", "stop", "p1").exit_code == 0
    renamed = sluice(api, "--json", "processors", "modify", "p1", "--rename", "p2", "--no-dlq")
    assert (
        json.loads(renamed.stdout)["name"] == "p2" and json.loads(renamed.stdout)["options"] == {}
    )
    assert sluice(api, "processors", "drop", "p2").stdout.strip() == "dropped p2"


def test_errors_print_the_problems_path_first_and_exit_2(api: TestClient, tmp_path: Path) -> None:
    pipeline = tmp_path / "bad.json"
    pipeline.write_text(json.dumps([{"$source": {"connectionName": "nope"}}, {"$matchh": {}}]))
    result = sluice(api, "processors", "create", "p1", str(pipeline))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: the pipeline has 2 problems (422 INVALID_PIPELINE)",
        "  /pipeline/1: Unknown stage '$matchh'; did you mean '$match'? [unknown_stage]",
        "  /pipeline/0/$source/connectionName: no connection named 'nope' is registered (see GET /api/v1/connections) [unknown_connection]",
    ]
    missing = sluice(api, "processors", "stop", "ghost")
    assert missing.exit_code == 1 and "404 PROCESSOR_NOT_FOUND" in missing.stderr
    usage = sluice(api, "processors", "create", "p1", str(pipeline), "--dlq", "only/two")
    assert usage.exit_code == 2 and "CONNECTION/DB/COLL" in usage.stderr


def test_ingest_sends_ndjson_and_arrays_in_chunks(api: TestClient, tmp_path: Path) -> None:
    sluice(api, "connections", "create", "in1", "--type", "HttpIngest")
    lines = tmp_path / "in.ndjson"
    lines.write_text(
        "".join(json.dumps({"i": i, "pad": "x" * 600}) + "\n" for i in range(10)) + "bad\n"
    )
    result = sluice(api, "--json", "ingest", "in1", str(lines), "--chunk-bytes", "2048")
    assert json.loads(result.stdout) == {"accepted": 11, "invalid": 1, "requests": 4}
    piped = sluice(api, "--json", "ingest", "in1", "-", stdin='[{"a": 1}, {"a": 2}]')
    assert json.loads(piped.stdout) == {"accepted": 2, "invalid": 0, "requests": 1}


def test_connection_commands_never_show_secrets(api: TestClient) -> None:
    created = sluice(
        api,
        "connections",
        "create",
        "k1",
        "--type",
        "Kafka",
        "--bootstrap-servers",
        "b:9092",
        "--mechanism",
        "PLAIN",
        "--username",
        "u",
        "--password",
        "hunter2",
        "--config",
        "acks=all",
    )
    assert created.exit_code == 0, created.output
    listed = sluice(api, "--json", "connections", "list")
    assert "hunter2" not in listed.stdout and '"acks": "all"' in listed.stdout
    assert sluice(api, "connections", "drop", "k1").exit_code == 0
    bad = sluice(api, "connections", "create", "k2", "--type", "Kafka", "--config", "novalue")
    assert bad.exit_code == 2


def test_dlq_commands(api: TestClient) -> None:
    sluice(api, "connections", "create", "in1", "--type", "HttpIngest")
    api.post(
        "/api/v1/processors",
        json={
            "name": "p1",
            "pipeline": [{"$source": {"connectionName": "in1"}}],
            "options": {"dlq": {"connectionName": "local", "db": "d", "coll": "c"}},
        },
    )
    assert sluice(api, "dlq", "count", "p1").stdout.strip() == "0"
    assert "0 of 0" in sluice(api, "dlq", "list", "p1", "--reason", "x").stdout
    assert sluice(api, "dlq", "purge", "p1", "--yes").stdout.strip() == "deleted 0"
    assert sluice(api, "dlq", "purge", "p1", stdin="n\n").exit_code == 1


def test_the_client_works_over_a_mock_transport() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path.endswith(":start"):
            return httpx.Response(
                409, json={"errorCode": "INVALID_STATE_TRANSITION", "detail": "no", "problems": []}
            )
        return httpx.Response(200, json={"results": [], "totalCount": 0})

    http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://sluice")
    client = SluiceClient(http)
    assert client.list_processors(page=2, per_page=5) == {"results": [], "totalCount": 0}
    assert seen[0].url.params["pageNum"] == "2" and seen[0].url.params["itemsPerPage"] == "5"
    result = CliRunner().invoke(app, ["processors", "start", "p"], obj=CliState(http=http))
    assert result.exit_code == 1 and "409 INVALID_STATE_TRANSITION" in result.stderr


def test_an_unreachable_service_is_explained() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    http = httpx.Client(transport=httpx.MockTransport(refuse), base_url="http://127.0.0.1:9")
    result = CliRunner().invoke(app, ["processors", "list"], obj=CliState(http=http))
    assert result.exit_code == 1 and "is `sluice serve` running?" in result.stderr


def test_target_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("SLUICE_URL", "SLUICE_API_KEY", "SLUICE_CONFIG", "SLUICE_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    data = tmp_path / "data"
    data.mkdir()
    (data / "api_key").write_text("sk_generated\n")
    monkeypatch.setenv("SLUICE_DATA_DIR", str(data))
    assert resolve_target(None, None) == resolve_target(None, None)
    assert resolve_target(None, None).api_key == "sk_generated"
    assert resolve_target(None, None).url == "http://127.0.0.1:8420"
    config = tmp_path / "sluice.toml"
    config.write_text('url = "http://conf:1/"\napi_key = "from-config"\n')
    assert resolve_target(None, None, str(config)).url == "http://conf:1"
    assert resolve_target(None, None, str(config)).api_key == "from-config"
    monkeypatch.setenv("SLUICE_URL", "http://env:2")
    monkeypatch.setenv("SLUICE_API_KEY", "from-env")
    assert resolve_target(None, None, str(config)) == resolve_target("http://env:2", "from-env")
    assert resolve_target("http://flag:3", "from-flag", str(config)).api_key == "from-flag"
    with pytest.raises(ValueError, match="does not exist"):
        resolve_target(None, None, str(tmp_path / "missing.toml"))


def test_ingest_sends_records_as_written(api: TestClient, tmp_path: Path) -> None:
    sluice(api, "connections", "create", "in2", "--type", "HttpIngest")
    array = tmp_path / "in.json"
    # A lone surrogate escape made the CLI crash re-encoding the array; duplicate keys were
    # silently merged. Both reach the service as written, counted as invalid.
    array.write_bytes(b'[{"a": 1, "a": 2}, {"s": "\\ud800"}, {"ok": 10.0}]')
    sent = sluice(api, "--json", "ingest", "in2", str(array))
    assert json.loads(sent.stdout) == {"accepted": 3, "invalid": 2, "requests": 1}
    lines = tmp_path / "in.ndjson"
    lines.write_text('{"i": 1}\n' + "\n" * 3000 + '{"i": 2}\n')  # blank lines fill a chunk
    chunked = sluice(api, "--json", "ingest", "in2", str(lines), "--chunk-bytes", "1024")
    assert json.loads(chunked.stdout) == {"accepted": 2, "invalid": 0, "requests": 1}


def test_stats_show_the_throttle_figures(api: TestClient, tmp_path: Path) -> None:
    assert sluice(api, "connections", "create", "in1", "--type", "HttpIngest").exit_code == 0
    pipeline = tmp_path / "p.json"
    pipeline.write_text(
        json.dumps(
            {
                "pipeline": [
                    {"$source": {"connectionName": "in1"}},
                    {"$throttle": {"messagesPerSec": 5}},
                ]
            }
        )
    )
    assert sluice(api, "processors", "create", "t1", str(pipeline)).exit_code == 0
    shown = sluice(api, "processors", "stats", "t1", "--verbose")
    assert shown.exit_code == 0, shown.output
    assert "throttle.throttledTimeMs" in shown.stdout
    assert "throttle.throttleEvents" in shown.stdout
    body = json.loads(sluice(api, "processors", "stats", "t1", "--verbose", "--json").stdout)
    assert body["throttle"] == {"throttledTimeMs": 0, "throttleEvents": 0}
    (operator,) = [o for o in body["operatorStats"] if o["name"] == "ThrottleOperator"]
    assert (operator["throttledTimeMs"], operator["throttleEvents"]) == (0, 0)


def test_stats_show_a_kafka_source_lag_per_partition() -> None:
    lag = {
        "partitions": [
            {"topic": "t", "partition": 0, "latestOffset": 10, "processedOffset": 4, "lag": 6},
            {"topic": "t", "partition": 1, "latestOffset": 5, "processedOffset": None, "lag": None},
        ],
        "totalLag": None,
    }
    console = Console(width=200, record=True)
    console.print(stats_view({"name": "k", "sourceLag": lag}))
    text = console.export_text()
    assert "sourceLag.totalLag" in text
    rows = {
        cells[1].strip(): cells[2].strip()
        for cells in (line.split("│") for line in text.splitlines())
        if len(cells) == 4
    }
    assert rows["sourceLag t/0"] == "6 (processed 4 of 10)"
    assert rows["sourceLag.totalLag"] == "no data"
    assert rows["sourceLag t/1"] == "no data (processed no data of 5)"
