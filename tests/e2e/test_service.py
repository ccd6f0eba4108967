"""End to end: the real service (`sluice serve`, Spark inside) driven over HTTP and the real CLI.

One service process serves the whole module (a JVM start costs 15-40 s); the last two tests
restart it, first with SIGTERM and then after `kill -9`, on the same data directory. Tests
run in file order and build on nothing but the service: each uses its own connection and
processor names.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.service_process import ServiceProcess, alive, free_port, jvm_pid, poll

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PIPELINE: list[dict[str, Any]] = [
    {"$source": {"connectionName": "orders"}},
    {"$match": {"kind": "reading"}},
    {"$addFields": {"ratio": {"$divide": ["$a", "$b"]}}},
    {"$project": {"_id": 0, "id": 1, "ratio": 1}},
]
DIVIDE_BY_ZERO = (
    "Failed to process input document in AddFieldsOperator with error: can't $divide by zero"
)
NOT_JSON = "Failed to process input document with error: input is not a valid JSON object"


@dataclass
class Running:
    """The module's service; restart tests replace `current`."""

    current: ServiceProcess


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    data_dir = tmp_path_factory.mktemp("e2e") / "data"
    running = Running(ServiceProcess(data_dir).start())
    yield running
    running.current.cleanup()


def outputs(client: httpx.Client, name: str) -> list[dict[str, Any]]:
    messages = client.get(f"/api/v1/processors/{name}/sample", params={"limit": 1000}).json()
    return [m for m in messages["messages"] if "_dlqMessage" not in m]


def sample_has(client: httpx.Client, name: str, count: int) -> list[dict[str, Any]] | None:
    body = client.get(f"/api/v1/processors/{name}/sample", params={"limit": 1000}).json()
    return body["messages"] if len(body["messages"]) >= count else None


def ids(messages: list[dict[str, Any]]) -> list[int]:
    return sorted(m["id"] for m in messages if "_dlqMessage" not in m)


def lines(stdout: str) -> list[Any]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


# --------------------------------------------------------------------------- security


def test_every_route_except_healthz_needs_an_api_key(svc: Running) -> None:
    service = svc.current
    assert httpx.get(f"{service.url}/openapi.json").status_code == 401
    with service.http() as client:
        spec = client.get("/openapi.json").json()
    checked = 0
    for path, operations in spec["paths"].items():
        url = service.url + path.replace("{name}", "p1").replace("{connectionName}", "c1")
        for method in operations:
            for headers in (
                {},
                {"Authorization": "Bearer wrong-key-0123456789"},
                {"Authorization": "Basic eDp5"},
            ):
                response = httpx.request(method.upper(), url, headers=headers, json={})
                if path == "/healthz":
                    assert response.status_code == 200
                    continue
                assert response.status_code == 401, (method, path, response.text)
                assert response.json()["errorCode"] == "UNAUTHORIZED"
                assert response.headers["www-authenticate"] == "Bearer"
                checked += 1
    assert checked >= 3 * 17
    denied = service.cli("--api-key", "not-the-key-0123456789", "processors", "list")
    assert denied.returncode == 1
    assert "401 UNAUTHORIZED" in denied.stderr
    key_file = service.data_dir / "api_key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert service.cli("processors", "list").returncode == 0  # the CLI found the generated key


# --------------------------------------------------------------------------- lifecycle


def test_create_start_ingest_sample_dlq_stop_restart_drop(svc: Running, tmp_path: Path) -> None:
    service = svc.current
    assert service.cli("connections", "create", "orders", "--type", "HttpIngest").returncode == 0
    pipeline_file = tmp_path / "pipeline.json"
    pipeline_file.write_text(json.dumps(PIPELINE))
    created = service.cli(
        "--json", "processors", "create", "orders_p", str(pipeline_file), "--dlq", "local/e2e/dlq"
    )
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["state"] == "CREATED"
    started = service.cli("--json", "processors", "start", "orders_p")
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["state"] == "STARTED"

    records = tmp_path / "records.ndjson"
    records.write_text(
        '{"id": 1, "kind": "reading", "a": 10, "b": 2}\n'
        '{"id": 2, "kind": "reading", "a": 7, "b": 0}\n'
        "not json at all\n"
        '{"id": 3, "kind": "other", "a": 1, "b": 1}\n'
        '{"id": 4, "kind": "reading", "a": 1.0, "b": 4}\n'
    )
    ingested = service.cli("--json", "ingest", "orders", str(records))
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout) == {"accepted": 5, "invalid": 1, "requests": 1}

    with service.http() as client:
        poll(
            lambda: sample_has(client, "orders_p", 4),
            timeout=120,
            message="no output/DLQ in sample",
        )
        sampled = service.cli("processors", "sample", "orders_p", "--limit", "50")
        assert sampled.returncode == 0, sampled.stderr
        messages = lines(sampled.stdout)
        assert [m for m in messages if "_dlqMessage" not in m] == [
            {"id": 1, "ratio": 5.0},
            {"id": 4, "ratio": 0.25},
        ]
        assert '"ratio": 5.0' in sampled.stdout  # a double stays a double
        reasons = {m["_dlqMessage"]["errInfo"]["reason"] for m in messages if "_dlqMessage" in m}
        assert reasons == {DIVIDE_BY_ZERO, NOT_JSON}

        listed = service.cli("--json", "dlq", "list", "orders_p")
        assert listed.returncode == 0, listed.stderr
        dlq = json.loads(listed.stdout)
        assert dlq["totalCount"] == 2
        by_operator = {d["operatorName"]: d for d in dlq["results"]}
        assert by_operator["AddFieldsOperator"]["doc"]["id"] == 2
        assert by_operator["SourceOperator"]["doc"] == "not json at all"
        assert all(
            d["processorName"] == "orders_p" and "$date" in d["dlqTime"] for d in dlq["results"]
        )
        counted = service.cli("dlq", "count", "orders_p", "--operator", "SourceOperator")
        assert counted.stdout.strip() == "1"

        stats = poll(
            lambda: (
                (s := client.get("/api/v1/processors/orders_p/stats").json())["inputMessageCount"]
                == 5
                and s
            ),
            timeout=30,
            message="stats never counted the 5 input records",
        )
        assert (stats["outputMessageCount"], stats["dlqMessageCount"], stats["status"]) == (
            2,
            2,
            "running",
        )
        assert stats["inputMessageSize"] > 0 and stats["outputMessageSize"] > 0

        stopped = service.cli("--json", "processors", "stop", "orders_p")
        assert json.loads(stopped.stdout)["state"] == "STOPPED"
        client.post("/api/v1/ingest/orders", json=[{"id": 5, "kind": "reading", "a": 6, "b": 3}])
        assert service.cli("processors", "start", "orders_p").returncode == 0  # from the checkpoint
        poll(
            lambda: ids(outputs(client, "orders_p")) == [1, 4, 5] or None,
            timeout=120,
            message="id 5 was not processed exactly once",
        )
        stats = poll(
            lambda: (
                (s := client.get("/api/v1/processors/orders_p/stats").json())["inputMessageCount"]
                == 6
                and s
            ),
            timeout=30,
            message="stats did not carry over the restart",
        )
        assert stats["outputMessageCount"] == 3

        purged = service.cli("dlq", "purge", "orders_p", "--operator", "SourceOperator", "--yes")
        assert purged.stdout.strip() == "deleted 1"
        assert client.get("/api/v1/processors/orders_p/dlq").json()["totalCount"] == 1

        processor_id = client.get("/api/v1/processors/orders_p").json()["_id"]
        assert (service.data_dir / "checkpoints" / processor_id).is_dir()
        assert service.cli("processors", "drop", "orders_p").returncode == 0
        assert client.get("/api/v1/processors/orders_p").status_code == 404
        assert not (service.data_dir / "checkpoints" / processor_id).exists()
        missing = service.cli("processors", "show", "orders_p")
        assert missing.returncode == 1 and "PROCESSOR_NOT_FOUND" in missing.stderr
    assert service.cli("connections", "drop", "orders").returncode == 0


WINDOW_PIPELINE: list[dict[str, Any]] = [
    {"$source": {"connectionName": "readings", "timeField": {"$toDate": "$t"}}},
    {
        "$tumblingWindow": {
            "interval": {"size": 10, "unit": "second"},
            "allowedLateness": {"size": 0, "unit": "second"},
            "pipeline": [
                {"$group": {"_id": "$k", "n": {"$sum": 1}, "total": {"$sum": "$v"}}},
                {"$sort": {"_id": 1}},
            ],
        }
    },
]


def at(second: int) -> str:
    return f"2024-01-01T00:00:{second:02d}.000Z"


def test_windowed_processor_emits_closed_windows_and_sends_late_records_to_the_dlq(
    svc: Running,
) -> None:
    """Window output through `sample`, the late record through `dlq`, decided per document."""
    service = svc.current
    with service.http() as client:
        client.post("/api/v1/connections", json={"name": "readings", "type": "HttpIngest"})
        body = {
            "name": "windows_p",
            "pipeline": WINDOW_PIPELINE,
            "options": {"dlq": {"connectionName": "local", "db": "e2e", "coll": "window_dlq"}},
        }
        assert client.post("/api/v1/processors", json=body).status_code == 201
        assert client.post("/api/v1/processors/windows_p:start").json()["state"] == "STARTED"
        # One request: the arrival order decides lateness, not the micro-batch boundaries.
        records = [
            {"id": 1, "k": "a", "v": 1, "t": at(1)},
            {"id": 2, "k": "b", "v": 2, "t": at(4)},
            {"id": 3, "k": "a", "v": 3, "t": at(9)},
            {"id": 4, "k": "a", "v": 4, "t": at(14)},  # watermark 13.999 s closes [0 s, 10 s)
            {"id": 5, "k": "b", "v": 5, "t": at(5)},  # late for [0 s, 10 s)
        ]
        accepted = client.post("/api/v1/ingest/readings", json=records)
        assert accepted.status_code == 202 and accepted.json()["accepted"] == 5

        messages = poll(
            lambda: sample_has(client, "windows_p", 3),
            timeout=120,
            message="no window output and DLQ record in sample",
        )
        windows = [m for m in messages if "_dlqMessage" not in m]
        assert [(w["_id"], w["n"], w["total"]) for w in windows] == [("a", 2, 4), ("b", 1, 2)]
        assert {json.dumps(w["_stream_meta"]["window"], sort_keys=True) for w in windows} == {
            json.dumps({"start": {"$date": at(0)}, "end": {"$date": at(10)}}, sort_keys=True)
        }
        dlq = client.get("/api/v1/processors/windows_p/dlq").json()
        assert dlq["totalCount"] == 1
        late = dlq["results"][0]
        assert late["errInfo"]["reason"] == "Input document arrived late."
        assert late["doc"]["id"] == 5
        assert late["missedWindowStartTimes"] == [{"$date": at(0)}]
        assert client.post("/api/v1/processors/windows_p:stop").json()["state"] == "STOPPED"
        assert client.delete("/api/v1/processors/windows_p").status_code == 204


def test_illegal_transitions_are_409_and_invalid_pipelines_422(
    svc: Running, tmp_path: Path
) -> None:
    service = svc.current
    with service.http() as client:
        assert (
            client.post(
                "/api/v1/connections", json={"name": "idle_in", "type": "HttpIngest"}
            ).status_code
            == 201
        )
        pipeline = [{"$source": {"connectionName": "idle_in"}}, {"$match": {"a": 1}}]
        assert (
            client.post(
                "/api/v1/processors", json={"name": "idle_p", "pipeline": pipeline}
            ).status_code
            == 201
        )

        denied = service.cli("processors", "stop", "idle_p")
        assert denied.returncode == 1
        assert "409 INVALID_STATE_TRANSITION" in denied.stderr
        assert "  /state: cannot stop processor 'idle_p': it is CREATED" in denied.stderr

        assert client.post("/api/v1/processors/idle_p:start").json()["state"] == "STARTED"
        again = client.post("/api/v1/processors/idle_p:start")
        assert again.status_code == 409 and again.json()["errorCode"] == "INVALID_STATE_TRANSITION"
        modify = client.patch("/api/v1/processors/idle_p", json={"name": "renamed"})
        assert modify.status_code == 409
        assert client.post("/api/v1/processors/idle_p:stop").json()["state"] == "STOPPED"
        assert client.post("/api/v1/processors/idle_p:stop").status_code == 409
        assert (
            client.patch("/api/v1/processors/idle_p", json={"name": "idle_q"}).json()["name"]
            == "idle_q"
        )
        assert client.delete("/api/v1/processors/idle_q").status_code == 204

        bad = [
            {"$source": {"connectionName": "nowhere"}},
            {"$matchh": {"a": 1}},
            {"$addFields": {"x": {"$nope": 1}}},
        ]
        rejected = client.post("/api/v1/processors", json={"name": "bad_p", "pipeline": bad})
        assert rejected.status_code == 422
        body = rejected.json()
        assert body["errorCode"] == "INVALID_PIPELINE"
        assert {(p["code"], p["path"]) for p in body["problems"]} >= {
            ("unknown_stage", "/pipeline/1"),
            ("unknown_connection", "/pipeline/0/$source/connectionName"),
        }
        compiled = client.post(
            "/api/v1/processors",
            json={"name": "bad_p", "pipeline": [pipeline[0], {"$addFields": {"x": {"$nope": 1}}}]},
        )
        assert compiled.status_code == 422
        assert compiled.json()["problems"][0]["path"] == "/pipeline/1/$addFields/x/$nope"

    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps(bad))
    result = service.cli("processors", "create", "bad_p", str(bad_file))
    assert result.returncode == 2
    problem_lines = [line for line in result.stderr.splitlines() if line.startswith("  /")]
    assert (
        "  /pipeline/1: Unknown stage '$matchh'; did you mean '$match'? [unknown_stage]"
        in problem_lines
    )


def test_spark_failure_is_retried_then_failed_never_a_500(svc: Running) -> None:
    service = svc.current
    down = f"mongodb://127.0.0.1:{free_port()}/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"
    with service.http() as client:
        client.post("/api/v1/connections", json={"name": "fail_in", "type": "HttpIngest"})
        client.post("/api/v1/connections", json={"name": "down", "type": "Cluster", "uri": down})
        pipeline = [
            {"$source": {"connectionName": "fail_in"}},
            {"$addFields": {"r": {"$divide": [1, "$b"]}}},
        ]
        dlq = {"connectionName": "down", "db": "x", "coll": "dlq"}
        created = client.post(
            "/api/v1/processors",
            json={"name": "fail_p", "pipeline": pipeline, "options": {"dlq": dlq}},
        )
        assert created.status_code == 201, created.text
        assert client.post("/api/v1/processors/fail_p:start").json()["state"] == "STARTED"
        client.post("/api/v1/ingest/fail_in", json=[{"b": 0}])  # a DLQ record the DLQ cannot take
        # While it retries, the processor shows its error and retries, and never `running`.
        retrying = poll(
            lambda: (
                ((p := client.get("/api/v1/processors/fail_p").json())["error"] is not None) and p
            ),
            timeout=180,
            every=0.05,
            message="the processor never showed an error",
        )
        assert retrying["state"] == "STARTED", f"it failed before showing its retries: {retrying}"
        assert retrying["error"]["code"] == "spark_failure" and retrying["error"]["retries"] >= 1
        assert retrying["error"]["time"] is not None
        assert retrying["stats"]["status"] == "recovering", retrying["stats"]
        assert retrying["stats"]["retries"] >= 1
        assert retrying["stats"]["lastError"]["message"] == retrying["error"]["message"]
        failed = poll(
            lambda: (
                (p := client.get("/api/v1/processors/fail_p").json())["state"] == "FAILED" and p
            ),
            timeout=180,
            message="the processor never became FAILED",
        )
        assert failed["error"]["code"] == "spark_failure"
        assert failed["error"]["retries"] == 2  # SLUICE_RESTART_ATTEMPTS of the test service
        assert failed["stats"]["lastError"]["code"] == "spark_failure"
        assert (
            "Traceback" not in failed["error"]["message"]
            and "\tat " not in failed["error"]["message"]
        )
        assert failed["stats"]["status"] == "error"
        unavailable = client.get("/api/v1/processors/fail_p/dlq")
        assert (
            unavailable.status_code == 503
            and unavailable.json()["errorCode"] == "STORE_UNAVAILABLE"
        )
        assert client.post("/api/v1/processors/fail_p:stop").json()["state"] == "STOPPED"
        assert client.delete("/api/v1/processors/fail_p").status_code == 204


# --------------------------------------------------------------------------- restarts


def test_sigterm_then_restart_resumes_a_started_processor(svc: Running) -> None:
    service = svc.current
    with service.http() as client:
        client.post("/api/v1/connections", json={"name": "restart_in", "type": "HttpIngest"})
        pipeline = [
            {"$source": {"connectionName": "restart_in"}},
            {"$project": {"_id": 0, "id": 1}},
        ]
        body = {
            "name": "restart_p",
            "pipeline": pipeline,
            "options": {"dlq": {"connectionName": "local", "db": "e2e", "coll": "dlq"}},
        }
        processor_id = client.post("/api/v1/processors", json=body).json()["_id"]
        client.post("/api/v1/processors/restart_p:start")
        client.post("/api/v1/ingest/restart_in", json=[{"id": 1}, {"id": 2}])
        poll(
            lambda: ids(outputs(client, "restart_p")) == [1, 2] or None,
            timeout=120,
            message="no output",
        )
    jvm = jvm_pid(service.data_dir, processor_id)
    assert alive(jvm)
    # uvicorn re-raises the SIGTERM after its graceful shutdown, so -15 is a clean exit too.
    assert service.stop() in (0, -signal.SIGTERM)
    poll(lambda: not alive(jvm), timeout=60, message=f"JVM {jvm} outlived a clean shutdown")
    lock = service.data_dir / "checkpoints" / processor_id / "driver.lock"
    assert json.loads(lock.read_text()) == {}, "the query was not stopped cleanly"

    svc.current = service = ServiceProcess(service.data_dir).start()
    with service.http() as client:
        processor = client.get("/api/v1/processors/restart_p").json()
        assert processor["state"] == "STARTED"
        client.post("/api/v1/ingest/restart_in", json=[{"id": 3}])
        poll(
            lambda: ids(outputs(client, "restart_p")) == [1, 2, 3] or None,
            timeout=120,
            message="the processor did not resume",
        )


def test_kill_9_then_restart_recovers_without_duplicates(svc: Running) -> None:
    service = svc.current
    with service.http() as client:
        processor_id = client.get("/api/v1/processors/restart_p").json()["_id"]
        client.post("/api/v1/ingest/restart_in", json=[{"id": 4}, {"id": 5}])
        poll(
            lambda: ids(outputs(client, "restart_p")) == [1, 2, 3, 4, 5] or None,
            timeout=120,
            message="no output",
        )
    jvm = poll(lambda: jvm_pid(service.data_dir, processor_id), timeout=10, message="no lock file")
    service.kill9()
    poll(lambda: not alive(jvm), timeout=60, message=f"JVM {jvm} outlived its killed driver")

    svc.current = service = ServiceProcess(service.data_dir).start()
    with service.http() as client:
        assert client.get("/api/v1/processors/restart_p").json()["state"] == "STARTED"
        client.post("/api/v1/ingest/restart_in", json=[{"id": 6}])
        poll(
            lambda: ids(outputs(client, "restart_p")) == [1, 2, 3, 4, 5, 6] or None,
            timeout=120,
            message="recovery lost or duplicated output",
        )
        assert service.cli("processors", "stop", "restart_p").returncode == 0
