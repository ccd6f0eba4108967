"""`GET /processors/{name}/stats`: open windows, lag, DLQ by reason and operator, per-operator
output, ISO dates; and `sluice processors stats` (also `--watch`). No Spark: batches are handed
to the run's writer as the engine would (`FakeEngine.launches`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from pipeline_stages._stream.batch import BatchResult, Output
from service.cli.app import app
from service.cli.output import CliState
from tests.unit.service.api.app_client import api_client
from tests.unit.service.fake_engine import FakeEngine

DLQ = {"connectionName": "local", "db": "d", "coll": "dlq"}
PIPELINE = [
    {"$source": {"connectionName": "in1", "timeField": {"$toDate": "$t"}}},
    {"$addFields": {"r": {"$divide": ["$a", "$b"]}}},
    {
        "$tumblingWindow": {
            "interval": {"size": 10, "unit": "second"},
            "pipeline": [{"$group": {"_id": "$k", "n": {"$count": {}}}}],
        }
    },
]
LATE = "Input document arrived late."
DIVIDE = "Failed to process input document with error: can't $divide by zero"


@pytest.fixture
def client(tmp_path: Path, engine: FakeEngine) -> Iterator[TestClient]:
    with api_client(tmp_path, engine=engine) as test_client:
        test_client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
        body = {"name": "w", "pipeline": PIPELINE, "options": {"dlq": DLQ}}
        assert test_client.post("/api/v1/processors", json=body).status_code == 201
        assert test_client.post("/api/v1/processors/w:start").status_code == 200
        yield test_client


def dlq(n: int, operator: str, reason: str) -> dict[str, Any]:
    return {
        "_id": {"$oid": f"{n:024x}"},
        "errInfo": {"reason": reason},
        "operatorName": operator,
        "doc": {"n": n},
        "processorName": "w",
        "dlqTime": {"$date": "2024-01-01T00:00:05.000Z"},
    }


def window_row(bucket: int, open_windows: int, oldest: str | None, results: int) -> dict[str, Any]:
    return {
        "bucket": bucket,
        "openWindows": open_windows,
        "watermark": {"$date": "2024-01-01T00:00:19.999Z"},
        "stateSize": 64,
        "minOpenWindowStartTime": {"$date": oldest} if oldest else None,
        "outputMessageCount": results,
    }


def batch(batch_id: int) -> BatchResult:
    result = BatchResult(batch_id=batch_id)
    result.outputs = [Output('{"_id":"a","n":2}', "k1")]
    result.order = [("out", 0), ("dlq", 0), ("dlq", 1), ("dlq", 2)]
    result.dlq = [
        dlq(3 * batch_id, "GroupOperator", LATE),
        dlq(3 * batch_id + 1, "GroupOperator", LATE),
        dlq(3 * batch_id + 2, "AddFieldsOperator", DIVIDE),
    ]
    result.stats = [
        window_row(0, 2, "2024-01-01T00:00:10.000Z", 1),
        window_row(1, 1, "2024-01-01T00:00:00.000Z", 0),
    ]
    return result


def stats(client: TestClient, *, verbose: bool = True) -> dict[str, Any]:
    response = client.get("/api/v1/processors/w/stats", params={"verbose": str(verbose).lower()})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_stats_before_any_batch_say_no_data_rather_than_zero(client: TestClient) -> None:
    body = stats(client)
    assert body["openWindows"] is None and body["oldestOpenWindowStart"] is None
    assert body["eventTimeLagSeconds"] is None
    assert body["dlqByReason"] == {} and body["dlqByOperator"] == {}


def test_windows_lag_and_dlq_breakdowns(client: TestClient, engine: FakeEngine) -> None:
    writer = engine.launches[-1].writer
    writer.write(batch(0))
    writer.write(batch(0))  # a replayed batch replaces its counts, never adds them again
    body = stats(client)
    assert body["openWindows"] == 3
    assert body["oldestOpenWindowStart"] == "2024-01-01T00:00:00.000Z"
    watermark = datetime.fromisoformat(body["watermark"]["$date"].replace("Z", "+00:00"))
    lag = (datetime.now(tz=UTC) - watermark).total_seconds()
    assert 0 < body["eventTimeLagSeconds"] <= lag
    assert body["dlqByReason"] == {LATE: 2, DIVIDE: 1}
    assert body["dlqByOperator"] == {"GroupOperator": 2, "AddFieldsOperator": 1}
    outputs = {op["name"]: op.get("outputMessageCount") for op in body["operatorStats"]}
    # The window's group emitted 1 result; the last operator is the group too (no sink).
    assert outputs == {"SourceOperator": 0, "AddFieldsOperator": None, "GroupOperator": 1}

    writer.write(batch(1))
    body = stats(client)
    assert body["dlqByReason"] == {LATE: 4, DIVIDE: 2}
    assert body["dlqMessageCount"] == 6


def test_breakdowns_and_window_gauges_survive_a_stop(
    client: TestClient, engine: FakeEngine
) -> None:
    engine.launches[-1].writer.write(batch(0))
    assert client.post("/api/v1/processors/w:stop").status_code == 200
    body = stats(client)
    assert body["status"] == "stopped"
    assert (body["openWindows"], body["oldestOpenWindowStart"]) == (3, "2024-01-01T00:00:00.000Z")
    assert body["dlqByReason"] == {LATE: 2, DIVIDE: 1}


def test_the_cli_prints_dates_as_iso_and_watch_refreshes(
    client: TestClient, engine: FakeEngine
) -> None:
    engine.launches[-1].writer.write(batch(0))
    state = CliState(http=client)
    shown = CliRunner().invoke(app, ["processors", "stats", "w"], obj=state)
    assert shown.exit_code == 0, shown.output
    assert "2024-01-01T00:00:19.999Z" in shown.output and "$date" not in shown.output
    assert LATE in shown.output
    watched = CliRunner().invoke(
        app,
        ["processors", "stats", "w", "--watch", "--interval", "0.2", "--seconds", "0.5", "--json"],
        obj=CliState(http=client),
    )
    assert watched.exit_code == 0, watched.output
    assert watched.output.count('"openWindows": 3') >= 2  # the first answer, then refreshes
