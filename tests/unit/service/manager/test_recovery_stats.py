"""Stats across crashes and recovery, and a restart loop that shows itself (fake engine, no JVM).

* Counts are persisted with the batch they count: after a `kill -9` (the manager is dropped
  without stopping or flushing anything) a new service reports exactly what was written, and a
  batch Spark replays is not counted twice.
* A processor being resumed says `recovering`, with what it is doing, and its persisted counts.
* A query failing again and again shows its retries and last error (code, message, time) in its
  stats and on the processor as they happen, never `running` with `error: null`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline_stages._stream.batch import BatchResult, Output
from service.config.settings import Settings
from service.main import create_app
from service.manager.connections import ConnectionRegistry
from service.manager.processors import ProcessorManager
from service.manager.states import State
from service.schemas.processors import ProcessorCreate
from service.stores import Stores, open_stores
from tests.unit.service.fake_engine import FakeEngine

PIPELINE = [{"$source": {"connectionName": "sample_stream_solar"}}, {"$match": {"a": 1}}]
DLQ = {"connectionName": "local", "db": "d", "coll": "dlq"}
KEY = "unit-test-key-0123456789"


class BatchInputEngine(FakeEngine):
    """Like the Spark engine: each batch carries its input counts (`BatchResult.input`)."""

    @property
    def batch_input_metrics(self) -> bool:
        return True


class SlowSpark(FakeEngine):
    """An engine whose JVM takes its time: `driver_ids` waits until `ready` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = threading.Event()

    def start(self) -> None:
        self._state = "starting"

    def driver_ids(self) -> dict[str, int]:
        assert self.ready.wait(30), "the test never let Spark start"
        self._state = "ready"
        return super().driver_ids()


def settings(tmp_path: Path, **extra: Any) -> Settings:
    # No periodic flush: whatever survives a crash was persisted with its batch.
    return Settings(
        data_dir=tmp_path,
        api_keys=[KEY],
        restart_attempts=2,
        stats_flush_seconds=3600,
        spark_eager=False,
        **extra,
    )


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_stores(data_dir=tmp_path)
    yield opened
    opened.close()


def manager_for(tmp_path: Path, stores: Stores, engine: FakeEngine) -> ProcessorManager:
    return ProcessorManager(
        settings=settings(tmp_path),
        stores=stores,
        engine=engine,
        connections=ConnectionRegistry(stores),
    )


def crash(manager: ProcessorManager) -> None:
    """`kill -9` as far as the store and the checkpoints can tell: nothing is stopped, flushed
    or closed; only the process's checkpoint locks go (the kernel drops them with it)."""
    manager.runs.stop_supervisor()
    for run in manager.runs.all():
        run.lock.release()


def poll(condition: Callable[[], Any], *, timeout: float = 20, message: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{message} (after {timeout:g} s)")


def batch(batch_id: int, outputs: int, dlq: int, reads: int) -> BatchResult:
    result = BatchResult(batch_id=batch_id)
    for i in range(outputs):
        result.order.append(("out", len(result.outputs)))
        result.outputs.append(Output(f'{{"b":{batch_id},"i":{i}}}', f"k{batch_id}-{i}"))
    for i in range(dlq):
        result.order.append(("dlq", len(result.dlq)))
        result.dlq.append(
            {
                "_id": {"$oid": f"{batch_id:012x}{i:012x}"},
                "_stream_meta": {},
                "errInfo": {"reason": "boom"},
                "operatorName": "AddFieldsOperator",
                "doc": {"i": i},
                "processorName": "p",
                "dlqTime": {"$date": "2024-01-01T00:00:00.000Z"},
            }
        )
    # Set as an attribute (not a constructor argument) so this module runs on code without it.
    result.input = {"count": reads, "bytes": reads * 10}
    return result


def deliver(manager: ProcessorManager, engine: FakeEngine, result: BatchResult) -> None:
    """One micro-batch as Spark runs it: written through the sink, then reported."""
    run = manager.runs.get(manager.get("p").id)
    assert run is not None and run.handle is not None
    run.request.writer.write(result)
    reads = result.input or {}
    progress = {
        "batchId": result.batch_id,
        "numInputRows": reads.get("count", 0),
        "observedMetrics": {"sluice_source_input": reads},
    }
    engine.progress(run.handle.query_id, progress)


COUNTED = [(0, 3, 1, 5), (1, 2, 0, 2), (2, 4, 2, 7)]


def expected(batches: list[tuple[int, int, int, int]]) -> dict[str, int]:
    return {
        "inputMessageCount": sum(b[3] for b in batches),
        "inputMessageSize": sum(b[3] * 10 for b in batches),
        "outputMessageCount": sum(b[1] for b in batches),
        "dlqMessageCount": sum(b[2] for b in batches),
    }


def counters(stats: dict[str, Any]) -> dict[str, int]:
    return {name: stats[name] for name in expected([])}


@pytest.mark.parametrize(
    "engine_type", [BatchInputEngine, FakeEngine], ids=["with-batch", "progress"]
)
def test_counts_survive_kill_9_exactly_and_a_replay_is_not_counted_twice(
    tmp_path: Path, stores: Stores, engine_type: type[FakeEngine]
) -> None:
    engine = engine_type()
    first = manager_for(tmp_path, stores, engine)
    first.create(ProcessorCreate(name="p", pipeline=PIPELINE, options={"dlq": DLQ}))
    first.start("p")
    for spec in COUNTED:
        deliver(first, engine, batch(*spec))
    assert counters(first.stats(first.get("p"))) == expected(COUNTED)
    crash(first)  # then a new service opens the same store
    engine = engine_type()
    second = manager_for(tmp_path, stores, engine)
    second.recover()
    stats = second.stats(second.get("p"))
    assert counters(stats) == expected(COUNTED)
    assert (stats["status"], stats["statusDetail"]) == ("recovering", "replaying from checkpoint")
    # Spark replays batch 2 (planned, not committed when the process died): same counts.
    deliver(second, engine, batch(*COUNTED[-1]))
    stats = second.stats(second.get("p"))
    assert counters(stats) == expected(COUNTED)
    assert stats["status"] == "running" and "statusDetail" not in stats
    deliver(second, engine, batch(3, 1, 1, 2))
    assert counters(second.stats(second.get("p"))) == expected([*COUNTED, (3, 1, 1, 2)])
    # What the DLQ holds is what the stats say.
    assert (
        stores.dlq("d", "dlq").count(_query())
        == expected([*COUNTED, (3, 1, 1, 2)])["dlqMessageCount"]
    )
    second.close()
    third = manager_for(tmp_path, stores, FakeEngine())  # stopped: read from the store
    assert counters(third.stats(third.get("p"))) == expected([*COUNTED, (3, 1, 1, 2)])


def _query() -> Any:
    from service.stores import DlqQuery

    return DlqQuery(processor="p")


def test_a_resuming_processor_says_recovering_with_its_persisted_counts(
    tmp_path: Path, stores: Stores
) -> None:
    engine = BatchInputEngine()
    first = manager_for(tmp_path, stores, engine)
    first.create(ProcessorCreate(name="p", pipeline=PIPELINE))
    first.start("p")
    deliver(first, engine, batch(0, 3, 0, 4))
    crash(first)

    slow = SlowSpark()
    second = manager_for(tmp_path, stores, slow)
    second.open()  # Spark starts in the background; resuming waits for it
    try:
        stats = second.stats(second.get("p"))
        assert (stats["status"], stats["statusDetail"]) == ("recovering", "starting Spark")
        assert counters(stats) == expected([(0, 3, 0, 4)])
        slow.ready.set()
        run = poll(
            lambda: (r := second.runs.get(second.get("p").id)) is not None and r.handle and r,
            message="the processor was not resumed",
        )
        stats = second.stats(second.get("p"))
        assert (stats["status"], stats["statusDetail"]) == (
            "recovering",
            "replaying from checkpoint",
        )
        assert counters(stats) == expected([(0, 3, 0, 4)])
        # Nothing to replay: Spark reports the query idle, and it is running.
        slow.progress(run.handle.query_id, {"idle": True})
        stats = second.stats(second.get("p"))
        assert stats["status"] == "running" and counters(stats) == expected([(0, 3, 0, 4)])
    finally:
        slow.ready.set()
        second.close()


FAILURE = (
    "pymongo.errors.ServerSelectionTimeoutError: db.example:27017: timed out, "
    "Timeout: 30.0s, Topology Description: <...>"
)


def test_a_restart_loop_shows_its_retries_and_last_error_as_they_happen(tmp_path: Path) -> None:
    engine = FakeEngine()
    app = create_app(settings(tmp_path), engine=engine, stores=open_stores(data_dir=tmp_path))
    manager: ProcessorManager = app.state.services.manager
    with TestClient(app, headers={"Authorization": f"Bearer {KEY}"}) as client:
        body = {"name": "p", "pipeline": PIPELINE}
        assert client.post("/api/v1/processors", json=body).status_code == 201
        assert client.post("/api/v1/processors/p:start").json()["state"] == "STARTED"
        manager.runs.stop_supervisor()  # the test ticks it
        before = time.time()
        for attempt in (1, 2):
            engine.queries[-1].fail(FAILURE)
            manager.runs.tick()
            shown = client.get("/api/v1/processors/p").json()
            assert shown["state"] == "STARTED"
            error = shown["error"]
            assert error is not None, shown
            assert (error["code"], error["message"], error["retries"]) == (
                "spark_failure",
                FAILURE,
                attempt,
            )
            assert _seconds(error["time"]) >= before - 1
            stats = client.get("/api/v1/processors/p/stats").json()
            assert stats["status"] == "recovering" and stats["retries"] == attempt
            assert stats["statusDetail"].startswith("restarting after an error in ")
            assert stats["lastError"]["code"] == "spark_failure"
            assert stats["lastError"]["message"] == FAILURE
            assert _seconds(stats["lastError"]["time"]) >= before - 1
            run = manager.runs.get(shown["_id"])
            assert run is not None
            run.retry_at = 0  # due now
            manager.runs.tick()
            stats = client.get("/api/v1/processors/p/stats").json()
            assert stats["status"] == "recovering", stats  # restarted, nothing done yet
            assert stats["statusDetail"] == (
                f"replaying from checkpoint after an error (retry {attempt} of 2)"
            )
            assert stats["lastError"]["message"] == FAILURE
            # An idle report is no sign of health: the next batch fails again.
            engine.progress(engine.queries[-1].query_id, {"idle": True})
            assert manager.runs.get(shown["_id"]).failures == attempt  # type: ignore[union-attr]
        engine.queries[-1].fail(FAILURE)
        manager.runs.tick()
        failed = client.get("/api/v1/processors/p").json()
        assert failed["state"] == "FAILED"
        assert failed["error"]["code"] == "spark_failure" and failed["error"]["retries"] == 2
        assert failed["stats"]["status"] == "error" and failed["stats"]["retries"] == 2
        assert failed["stats"]["lastError"]["message"] == FAILURE
        restarted = client.post("/api/v1/processors/p:start").json()
        assert restarted["error"] is None and restarted["stats"]["retries"] == 0
    assert manager.get("p").state is State.STARTED


def _seconds(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
