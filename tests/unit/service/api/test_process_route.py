"""`POST /api/v1/pipelines:process` without Spark: what is answered before anything runs, and
how the CLI turns the stream's frames back into `sluice process` output.

The run itself (a real query on the service's session, the disconnect, the listing) is in
`tests/e2e/test_process_service.py`.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from rich.console import Console
from typer.testing import CliRunner

from service.cli.app import app
from service.cli.output import CliState
from service.cli.process import _refused, _relay
from tests.unit.service.api.app_client import api_client
from tests.unit.service.fake_engine import FakeEngine

ROUTE = "/api/v1/pipelines:process"
FINITE = [{"$source": {"documents": [{"n": 1}]}}, {"$match": {"n": 1}}]


@pytest.fixture
def client(tmp_path: Path, engine: FakeEngine) -> Iterator[TestClient]:
    with api_client(tmp_path, engine=engine) as test_client:
        yield test_client


def ephemeral(client: TestClient) -> list[dict[str, Any]]:
    body = client.get("/api/v1/processors").json()
    return [p for p in body["results"] if p.get("ephemeral")]


def test_the_output_streams_back_as_frames_and_the_run_is_not_kept(
    client: TestClient, engine: FakeEngine
) -> None:
    response = client.post(ROUTE, json={"pipeline": FINITE, "batchSize": 7, "maxSeconds": 5})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    frames = [json.loads(line) for line in response.text.splitlines()]
    name = frames[0]["started"]["name"]
    assert name.startswith("process-")
    assert frames[1:] == [{"out": {"n": 1}}, {"exit": 0}]
    (request,) = engine.processes
    assert (request.name, request.batch_size, request.max_seconds) == (name, 7, 5)
    assert request.pipeline == FINITE
    assert ephemeral(client) == []


def test_an_integral_float_is_an_integer_as_json_schema_says(
    client: TestClient, engine: FakeEngine
) -> None:
    response = client.post(ROUTE, json={"pipeline": FINITE, "batchSize": 2.0})
    assert response.status_code == 200, response.text
    assert engine.processes[-1].batch_size == 2
    assert client.post(ROUTE, json={"pipeline": FINITE, "batchSize": 2.5}).status_code == 422
    assert client.post(ROUTE, json={"pipeline": FINITE, "batchSize": "2"}).status_code == 422


def test_a_running_ephemeral_processor_is_listed_and_stopped_with_its_stream(
    client: TestClient, engine: FakeEngine
) -> None:
    endless = [{"$source": {"connectionName": "sample_stream_solar"}}]
    client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
    stored = {"name": "p1", "pipeline": [{"$source": {"connectionName": "in1"}}]}
    assert client.post("/api/v1/processors", json=stored).status_code == 201
    with client.stream("POST", ROUTE, json={"pipeline": endless}) as response:
        lines = response.iter_lines()
        name = json.loads(next(lines))["started"]["name"]
        assert json.loads(next(lines)) == {"out": {"waiting": name}}
        (listed,) = ephemeral(client)
        assert (listed["name"], listed["state"], listed["pipeline"]) == (name, "STARTED", endless)
        page = client.get("/api/v1/processors", params={"itemsPerPage": 1}).json()
        assert page["totalCount"] == 2 and [p["name"] for p in page["results"]] == ["p1"]
        page = client.get("/api/v1/processors", params={"itemsPerPage": 1, "pageNum": 2})
        assert [p["name"] for p in page.json()["results"]] == [name]
        opened = client.get(f"/api/v1/processors/{name}")
        assert opened.status_code == 200, opened.text
        assert (opened.json()["state"], opened.json()["ephemeral"]) == ("STARTED", True)
        state = CliState(http=client, stdout=Console(width=200, soft_wrap=True))
        listing = CliRunner().invoke(app, ["processors", "list"], obj=state)
        assert f"{name} (ephemeral)" in listing.output and "p1 (ephemeral)" not in listing.output
    # Closing the stream cancels the run, which leaves the list.
    (request,) = engine.processes
    assert request.cancel.wait(30)
    deadline = time.monotonic() + 30
    while ephemeral(client) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ephemeral(client) == []


def test_an_ephemeral_processor_opens_by_name_as_the_console_does(
    client: TestClient, engine: FakeEngine
) -> None:
    endless = [{"$source": {"connectionName": "sample_stream_solar"}}]
    with client.stream("POST", ROUTE, json={"pipeline": endless}) as response:
        lines = response.iter_lines()
        name = json.loads(next(lines))["started"]["name"]
        next(lines)  # the fake run's one output line
        path = f"/api/v1/processors/{name}"
        stats = client.get(f"{path}/stats", params={"verbose": True})
        assert stats.status_code == 200, stats.text
        assert (stats.json()["name"], stats.json()["outputMessageCount"]) == (name, 1)
        # No query progress: what is not counted is null ("no data"), not 0.
        unknown = ("inputMessageCount", "inputMessageSize", "outputMessageSize", "stateSize")
        assert [stats.json()[key] for key in unknown] == [None] * len(unknown)
        sample = client.get(f"{path}/sample", params={"limit": 5})
        assert sample.json() == {"messages": [{"waiting": name}], "cursorId": None}
        history = client.get(f"{path}/stats/history")
        assert history.status_code == 200 and history.json()["name"] == name
        assert client.post(f"{path}:start").status_code == 404  # never restarted
        stopped = client.post(f"{path}:stop")
        assert stopped.status_code == 200 and stopped.json()["state"] == "STOPPED"
        (request,) = engine.processes
        assert request.cancel.is_set()
        rest = [json.loads(line) for line in lines]
    assert rest[-1] == {"exit": 1}  # cancelled, as a disconnected client cancels it
    assert client.get(path).status_code == 404
    assert client.delete(path).status_code == 404
    assert client.get(f"{path}/stats").status_code == 404


def test_dropping_an_ephemeral_processor_stops_its_run(
    client: TestClient, engine: FakeEngine
) -> None:
    endless = [{"$source": {"connectionName": "sample_stream_solar"}}]
    with client.stream("POST", ROUTE, json={"pipeline": endless}) as response:
        lines = response.iter_lines()
        name = json.loads(next(lines))["started"]["name"]
        assert client.delete(f"/api/v1/processors/{name}").status_code == 204
        assert [json.loads(line) for line in lines][-1] == {"exit": 1}
    assert engine.processes[-1].cancel.is_set()


def test_a_key_is_required(client: TestClient) -> None:
    response = client.post(ROUTE, json={"pipeline": FINITE}, headers={"Authorization": ""})
    assert response.status_code == 401
    assert response.json()["errorCode"] == "UNAUTHORIZED"


def test_problems_found_without_spark_are_a_422_at_their_body_paths(client: TestClient) -> None:
    pipeline = [
        {"$source": {"connectionName": "nope"}},
        {"$addFields": {"a": {"$foo": 1}}},
        {"$limit": 0},
    ]
    response = client.post(ROUTE, json={"pipeline": pipeline})
    assert response.status_code == 422, response.text
    paths = {p["path"] for p in response.json()["problems"]}
    assert "/pipeline/0/$source/connectionName" in paths
    assert any(path.startswith("/pipeline/1/$addFields") for path in paths)
    assert any(path.startswith("/pipeline/2/$limit") for path in paths)
    assert client.get("/api/v1/processors").json() == {"results": [], "totalCount": 0}


@pytest.mark.parametrize(
    "body",
    [
        {"pipeline": []},
        {"pipeline": FINITE, "maxSeconds": 0},
        {"pipeline": FINITE, "batchSize": 0},
        {"pipeline": FINITE, "options": {}},
    ],
)
def test_a_malformed_body_is_a_422(client: TestClient, body: dict[str, object]) -> None:
    response = client.post(ROUTE, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["problems"]


def test_without_spark_the_answer_is_503_and_nothing_is_listed(
    client: TestClient, engine: FakeEngine
) -> None:
    engine.unavailable = "Spark failed to start"
    response = client.post(ROUTE, json={"pipeline": FINITE})
    assert response.status_code == 503, response.text
    assert response.json()["errorCode"] == "ENGINE_UNAVAILABLE"
    assert client.get("/api/v1/processors").json()["totalCount"] == 0


def test_the_route_is_documented_as_ndjson(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"][ROUTE]["post"]
    assert set(operation["responses"]["200"]["content"]) == {"application/x-ndjson"}
    assert {"401", "409", "422", "503"} <= set(operation["responses"])


def test_frames_become_the_local_output_byte_for_byte() -> None:
    document = '{"_id":"d1","avg":100.0,"t":{"$date":"2024-01-01T00:00:00.000Z"}}'
    dlq = '{"_dlqMessage": {"errInfo": {"reason": "Input document arrived late."}}}'
    lines = [
        json.dumps({"started": {"name": "process-0a1b2c3d"}}),
        '{"out":' + document + "}",
        '{"out":' + dlq + "}",
        '{"err":' + json.dumps({"warning": "stopped after 5 s"}) + "}",
        json.dumps({"exit": 0}),
    ]
    out, err = io.StringIO(), io.StringIO()
    assert _relay(iter(lines), out=out, err=err) == 0
    assert out.getvalue() == document + "\n" + dlq + "\n"
    assert json.loads(err.getvalue()) == {"warning": "stopped after 5 s"}


def test_a_stream_without_an_exit_frame_is_a_failure() -> None:
    err = io.StringIO()
    assert _relay(iter([json.dumps({"started": {"name": "p"}})]), out=io.StringIO(), err=err) == 1
    assert "without an exit code" in json.loads(err.getvalue())["error"]


def test_a_422_prints_the_problems_at_local_paths_and_exits_2() -> None:
    problem = {"code": "unknown_operator", "path": "/pipeline/1/$match", "message": "no"}
    response = httpx.Response(422, json={"errorCode": "INVALID_PIPELINE", "problems": [problem]})
    err = io.StringIO()
    assert _refused(response, err) == 2
    assert json.loads(err.getvalue())["problems"] == [{**problem, "path": "/1/$match"}]


@pytest.mark.parametrize("status", [401, 404, 503])
def test_a_refusal_falls_back_to_a_local_run_with_a_warning(status: int) -> None:
    response = httpx.Response(status, json={"detail": "no"})
    err = io.StringIO()
    assert _refused(response, err) is None
    assert "running locally" in json.loads(err.getvalue())["warning"]
