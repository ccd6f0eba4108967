"""End to end: a processor's checkpoint keeps its window engine and bucket count when the
service's settings change.

The operator keeps open windows in Spark's state store, the batch engine beside the
checkpoint (`service.runtime.window_pins`), and the operator's groups are split over
`spark.sluice.window.buckets` buckets. A service restarted with the engine switched and the
bucket count changed must resume a started processor on the engine and buckets that wrote
its state, so a window opened before the restart still counts the documents it had, each
once; a processor created after the restart runs on the new engine.

One test, two service lifetimes (each a JVM start): the first on the operator with two
buckets, the second on the batch engine with one.
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


def group_pipeline(connection: str) -> list[dict[str, Any]]:
    """A tumbling `$group` window: the groups split over the operator's buckets."""
    window = window_pipeline(connection)
    window[1]["$tumblingWindow"]["pipeline"] = [{"$group": {"_id": "$k", "n": {"$sum": 1}}}]
    return window


def test_started_processors_keep_their_window_engine_and_buckets_across_a_conf_change(
    tmp_path: Path, services: list[ServiceProcess]
) -> None:
    data_dir = tmp_path / "data"
    two_buckets = {"SLUICE_SPARK_CONF_spark__sluice__window__buckets": "2"}
    services.append(service := ServiceProcess(data_dir, extra_env=two_buckets).start())
    keys = "abcdefgh"
    first = [{"k": "a", "t": at(1)}, {"k": "b", "t": at(4)}, {"k": "a", "t": at(9)}]
    spread = [{"k": k, "t": at(1 + n)} for n, k in enumerate(keys)]
    with service.http() as client:
        kept = create_and_start(client, "kept")
        client.post("/api/v1/connections", json={"name": "split_in", "type": "HttpIngest"})
        body = {"name": "split", "pipeline": group_pipeline("split_in")}
        split = str(client.post("/api/v1/processors", json=body).json()["_id"])
        assert client.post("/api/v1/processors/split:start").json()["state"] == "STARTED"
        for name, records in (("kept", first), ("split", spread)):
            assert client.post(f"/api/v1/ingest/{name}_in", json=records).status_code == 202
        for name, records in (("kept", first), ("split", spread)):
            poll(
                lambda n=name, r=records: counted(client, n, len(r)),
                timeout=120,
                message=f"the records of {name} were not read",
            )
        assert windows(client, "kept") is None  # [0 s, 10 s) is still open
        assert windows(client, "split") is None
    service.stop()

    services.append(service := ServiceProcess(data_dir, extra_env=BATCH_ENGINE).start())
    with service.http() as client:
        assert client.get("/api/v1/processors/kept").json()["state"] == "STARTED"
        fresh = create_and_start(client, "fresh")
        closing = [{"k": "a", "t": at(14)}]
        inputs = {
            "kept": closing,
            "fresh": first + closing,
            "split": [{"k": "a", "t": at(9)}, {"k": "a", "t": at(14)}],
        }
        for name, records in inputs.items():
            assert client.post(f"/api/v1/ingest/{name}_in", json=records).status_code == 202
        # The window opened before the restart counts the records it held then.
        found = poll(lambda: windows(client, "kept"), timeout=120, message="no window from kept")
        assert found == [("a", 2), ("b", 1)]
        fresh_found = poll(lambda: windows(client, "fresh"), timeout=120, message="no window")
        assert fresh_found == [("a", 2), ("b", 1)]
        # The groups whose partials the second bucket held are still counted, once.
        split_found = poll(
            lambda: (w := windows(client, "split")) and len(w) >= len(keys) and w,
            timeout=120,
            message=f"not every group of {keys} was emitted",
        )
    assert sorted(split_found) == [("a", 2)] + [(k, 1) for k in keys[1:]]
    # None of them closes windows on the wall clock: their checkpoints run the operator
    # without processing-time timeouts, recorded at their first start (`window_pins`).
    for processor_id in (kept, split, fresh):
        [timers] = (data_dir / "checkpoints" / processor_id).rglob("sluice-window-timers")
        assert timers.read_text() == "none\n"
    # `kept` and `split` ran on the operator before and after; `fresh` on the batch engine.
    assert not batch_state(data_dir, kept)
    assert not batch_state(data_dir, split)
    assert batch_state(data_dir, fresh)
