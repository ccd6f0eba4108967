"""End to end: a processor's checkpoint keeps its window engine when the service's changes.

The operator keeps open windows in Spark's state store, the batch engine beside the
checkpoint (`service.runtime.window_pins`). A service restarted with `spark.sluice.window.engine`
switched must resume a started processor on the engine that wrote its state, so a window
opened before the restart still counts the documents it had; a processor created after the
restart runs on the new engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.service_process import ServiceProcess, poll

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BATCH_ENGINE = {"SLUICE_SPARK_CONF_spark__sluice__window__engine": "batch"}


def window_pipeline(connection: str) -> list[dict[str, Any]]:
    return [
        {"$source": {"connectionName": connection, "timeField": {"$toDate": "$t"}}},
        {
            "$tumblingWindow": {
                "interval": {"size": 10, "unit": "second"},
                "allowedLateness": {"size": 0, "unit": "second"},
                "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
            }
        },
    ]


def at(second: int) -> str:
    return f"2024-01-01T00:00:{second:02d}.000Z"


def create_and_start(client: httpx.Client, name: str) -> str:
    client.post("/api/v1/connections", json={"name": f"{name}_in", "type": "HttpIngest"})
    body = {"name": name, "pipeline": window_pipeline(f"{name}_in")}
    processor_id = client.post("/api/v1/processors", json=body).json()["_id"]
    assert client.post(f"/api/v1/processors/{name}:start").json()["state"] == "STARTED"
    return str(processor_id)


def counted(client: httpx.Client, name: str, inputs: int) -> bool:
    stats = client.get(f"/api/v1/processors/{name}/stats").json()
    return stats.get("inputMessageCount", 0) >= inputs


def windows(client: httpx.Client, name: str) -> list[tuple[str, int]] | None:
    body = client.get(f"/api/v1/processors/{name}/sample", params={"limit": 100}).json()
    found = [(m["_id"], m["n"]) for m in body["messages"] if "_dlqMessage" not in m]
    return found or None


def batch_state(data_dir: Path, processor_id: str) -> list[Path]:
    return list((data_dir / "checkpoints" / processor_id).rglob("sluice-window-state/*.state"))


@pytest.fixture
def services() -> Iterator[list[ServiceProcess]]:
    started: list[ServiceProcess] = []
    yield started
    for service in started:
        service.cleanup()


def test_a_started_processor_keeps_its_window_engine_across_a_conf_change(
    tmp_path: Path, services: list[ServiceProcess]
) -> None:
    data_dir = tmp_path / "data"
    services.append(service := ServiceProcess(data_dir).start())
    with service.http() as client:
        kept = create_and_start(client, "kept")
        first = [{"k": "a", "t": at(1)}, {"k": "b", "t": at(4)}, {"k": "a", "t": at(9)}]
        assert client.post("/api/v1/ingest/kept_in", json=first).status_code == 202
        poll(lambda: counted(client, "kept", 3), timeout=120, message="the records were not read")
        assert windows(client, "kept") is None  # [0 s, 10 s) is still open
    service.stop()

    services.append(service := ServiceProcess(data_dir, extra_env=BATCH_ENGINE).start())
    with service.http() as client:
        assert client.get("/api/v1/processors/kept").json()["state"] == "STARTED"
        fresh = create_and_start(client, "fresh")
        closing = [{"k": "a", "t": at(14)}]
        for name, records in (("kept", closing), ("fresh", first + closing)):
            assert client.post(f"/api/v1/ingest/{name}_in", json=records).status_code == 202
        # The window opened before the restart counts the records it held then.
        found = poll(lambda: windows(client, "kept"), timeout=120, message="no window from kept")
        assert found == [("a", 2), ("b", 1)]
        fresh_found = poll(lambda: windows(client, "fresh"), timeout=120, message="no window")
        assert fresh_found == [("a", 2), ("b", 1)]
    # `kept` ran on the operator before and after; `fresh` on the batch engine.
    assert not batch_state(data_dir, kept)
    assert batch_state(data_dir, fresh)


def group_pipeline(connection: str) -> list[dict[str, Any]]:
    """A tumbling `$group` window: the groups split over the operator's buckets."""
    window = window_pipeline(connection)
    window[1]["$tumblingWindow"]["pipeline"] = [{"$group": {"_id": "$k", "n": {"$sum": 1}}}]
    return window


def test_a_started_processor_keeps_its_bucket_count_across_a_conf_change(
    tmp_path: Path, services: list[ServiceProcess]
) -> None:
    """Started on two buckets, resumed by a service configured for one: the groups whose
    partials the second bucket holds must still be counted, once."""
    data_dir = tmp_path / "data"
    two = {"SLUICE_SPARK_CONF_spark__sluice__window__buckets": "2"}
    services.append(service := ServiceProcess(data_dir, extra_env=two).start())
    keys = "abcdefgh"
    with service.http() as client:
        client.post("/api/v1/connections", json={"name": "split_in", "type": "HttpIngest"})
        body = {"name": "split", "pipeline": group_pipeline("split_in")}
        client.post("/api/v1/processors", json=body).raise_for_status()
        assert client.post("/api/v1/processors/split:start").json()["state"] == "STARTED"
        first = [{"k": k, "t": at(1 + n)} for n, k in enumerate(keys)]
        assert client.post("/api/v1/ingest/split_in", json=first).status_code == 202
        poll(lambda: counted(client, "split", len(keys)), timeout=120, message="not read")
        assert windows(client, "split") is None  # [0 s, 10 s) is still open
    service.stop()

    services.append(service := ServiceProcess(data_dir).start())
    with service.http() as client:
        closing = [{"k": "a", "t": at(9)}, {"k": "a", "t": at(14)}]
        assert client.post("/api/v1/ingest/split_in", json=closing).status_code == 202
        found = poll(
            lambda: (w := windows(client, "split")) and len(w) >= len(keys) and w,
            timeout=120,
            message=f"not every group of {keys} was emitted",
        )
    assert sorted(found) == [("a", 2)] + [(k, 1) for k in keys[1:]]
