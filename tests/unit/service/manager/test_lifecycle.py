"""The processor manager with the fake engine: state machine, failures, recovery, modify rules."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from service.config.settings import Settings
from service.errors import (
    InvalidTransition,
    ModificationRejected,
    PipelineRejected,
    ProcessorExists,
    ProcessorNotFound,
)
from service.manager.connections import ConnectionRegistry
from service.manager.positions import START_FILE
from service.manager.processors import ProcessorManager
from service.manager.runs import OVERLOAD_ATTEMPTS, OVERLOAD_MAX_BACKOFF_SECONDS, is_overload
from service.manager.states import TRANSITIONS, Action, State, next_state
from service.runtime.window_pins import record_timers
from service.schemas.processors import ProcessorCreate, ProcessorModify
from service.stores import Spool, open_stores
from tests.unit.service.fake_engine import FakeEngine

SOURCE = {"$source": {"connectionName": "sample_stream_solar"}}
WINDOW = {
    "$tumblingWindow": {
        "interval": {"size": 10, "unit": "second"},
        "pipeline": [{"$group": {"_id": "$device_id", "n": {"$sum": 1}}}],
    }
}


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ProcessorManager]:
    settings = Settings(
        data_dir=tmp_path, api_keys=["k" * 16], restart_attempts=2, stats_flush_seconds=3600
    )
    stores = open_stores(data_dir=tmp_path)
    engine = FakeEngine()
    built = ProcessorManager(
        settings=settings, stores=stores, engine=engine, connections=ConnectionRegistry(stores)
    )
    yield built
    built.runs.stop_supervisor()
    stores.close()


def engine_of(manager: ProcessorManager) -> FakeEngine:
    engine = manager.engine
    assert isinstance(engine, FakeEngine)
    return engine


def create(
    manager: ProcessorManager, name: str = "p", pipeline: list[Any] | None = None, **options: Any
) -> None:
    body = ProcessorCreate(
        name=name, pipeline=pipeline or [SOURCE, {"$match": {"a": 1}}], options=options
    )
    manager.create(body)


# --------------------------------------------------------------------------- the table


@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize(
    "action", [Action.START, Action.STOP, Action.MODIFY, Action.FAIL, Action.DROP]
)
def test_every_move_is_in_the_table_or_a_409(state: State, action: Action) -> None:
    if (state, action) in TRANSITIONS:
        assert next_state("p", state, action) is TRANSITIONS[(state, action)]
    else:
        with pytest.raises(InvalidTransition) as caught:
            next_state("p", state, action)
        assert caught.value.status == 409
        assert caught.value.problems[0].path == "/state"


def test_atlas_rules_start_only_when_not_started_and_modify_only_when_not_started() -> None:
    startable = {s for s in State if (s, Action.START) in TRANSITIONS}
    modifiable = {s for s in State if (s, Action.MODIFY) in TRANSITIONS}
    assert startable == modifiable == {State.CREATED, State.STOPPED, State.FAILED}
    assert {s for s in State if (s, Action.DROP) in TRANSITIONS} == set(State)


# --------------------------------------------------------------------------- lifecycle


def test_start_stop_drop(manager: ProcessorManager) -> None:
    create(manager)
    record = manager.start("p")
    assert record.state is State.STARTED
    assert manager.runs.get(record.id) is not None
    with pytest.raises(InvalidTransition):
        manager.start("p")
    with pytest.raises(InvalidTransition):
        manager.modify("p", ProcessorModify(name="q"))
    assert manager.stop("p").state is State.STOPPED
    assert not engine_of(manager).queries[0].is_active()
    with pytest.raises(InvalidTransition):
        manager.stop("p")
    manager.drop("p")
    with pytest.raises(ProcessorNotFound):
        manager.get("p")


def test_create_rejects_duplicates_and_collects_every_problem(manager: ProcessorManager) -> None:
    create(manager)
    with pytest.raises(ProcessorExists):
        create(manager)
    bad = [{"$source": {"connectionName": "nowhere"}}, {"$matchh": {}}, {"$merge": {"into": "x"}}]
    with pytest.raises(PipelineRejected) as caught:
        manager.create(
            ProcessorCreate(
                name="q",
                pipeline=bad,
                options={"dlq": {"connectionName": "missing", "db": "d", "coll": "c"}},
            )
        )
    found = {(p.code, p.path) for p in caught.value.problems}
    assert ("unknown_stage", "/pipeline/1") in found
    assert ("unknown_connection", "/pipeline/0/$source/connectionName") in found
    assert ("unknown_connection", "/options/dlq/connectionName") in found


def test_a_merge_sink_into_local_is_accepted(manager: ProcessorManager) -> None:
    pipeline = [SOURCE, {"$merge": {"into": {"connectionName": "local", "db": "d", "coll": "c"}}}]
    create(manager, pipeline=pipeline)
    assert manager.get("p").state is State.CREATED


def test_sink_connection_problems_are_reported_with_paths(manager: ProcessorManager) -> None:
    pipeline = [
        SOURCE,
        {
            "$merge": {
                "into": {"connectionName": "nowhere", "db": "d", "coll": "c"},
                "whenMatched": [{"$set": {"x": 1}}],
            }
        },
    ]
    with pytest.raises(PipelineRejected) as caught:
        create(manager, pipeline=pipeline)
    assert [(p.code, p.path) for p in caught.value.problems] == [
        ("unknown_connection", "/pipeline/1/$merge/into/connectionName"),
        ("unsupported_option", "/pipeline/1/$merge/whenMatched"),
    ]


def test_lint_warnings_come_back_with_a_valid_definition(manager: ProcessorManager) -> None:
    record, warnings = manager.create(ProcessorCreate(name="w", pipeline=[SOURCE, WINDOW]))
    assert record.state is State.CREATED
    assert {w.code for w in warnings} >= {"late_data_dropped"}


def fail_and_restart(manager: ProcessorManager, processor_id: str, error: str, times: int) -> None:
    """Fail the processor's query `times` times, each restart due at once (no backoff wait)."""
    engine = engine_of(manager)
    for _ in range(times):
        engine.queries[-1].fail(error)
        manager.runs.tick()
        if (run := manager.runs.get(processor_id)) is not None:
            run.retry_at = 0
            manager.runs.tick()


def test_a_failing_query_is_retried_with_backoff_then_failed(manager: ProcessorManager) -> None:
    create(manager)
    record = manager.start("p")
    engine = engine_of(manager)
    engine.queries[-1].fail("java.lang.RuntimeException: boom\nJVM stacktrace:\n\tat x")
    manager.runs.tick()
    run = manager.runs.get(record.id)
    assert run is not None and run.failures == 1 and run.handle is None
    assert manager.stats(manager.get("p"))["status"] == "recovering"  # retried soon
    run.retry_at = 0  # due now: do not wait for the backoff
    manager.runs.tick()
    assert len(engine.queries) == 2 and engine.queries[-1].is_active()
    fail_and_restart(manager, record.id, "java.lang.RuntimeException: boom", times=2)
    failed = manager.get("p")
    assert failed.state is State.FAILED
    assert failed.error is not None and failed.error.code == "spark_failure"
    assert failed.error.message == "java.lang.RuntimeException: boom"
    assert manager.start("p").state is State.STARTED  # FAILED -> STARTED is allowed


def test_progress_resets_the_failure_count_and_feeds_stats(manager: ProcessorManager) -> None:
    create(manager)
    record = manager.start("p")
    engine = engine_of(manager)
    run = manager.runs.get(record.id)
    assert run is not None
    run.failures = 1
    progress = {
        "batchId": 0,
        "numInputRows": 3,
        "observedMetrics": {"sluice_source_input": {"count": 3, "bytes": 42}},
    }
    engine.progress(engine.queries[-1].query_id, progress)
    engine.progress(engine.queries[-1].query_id, progress)  # a replayed batch id counts once
    assert run.failures == 0
    stats = manager.stats(manager.get("p"))
    assert (stats["inputMessageCount"], stats["inputMessageSize"]) == (3, 42)


def test_launch_failures_are_retried_not_raised(manager: ProcessorManager) -> None:
    create(manager)
    engine_of(manager).fail_next_launches = 1
    record = manager.start("p")
    assert record.state is State.STARTED
    run = manager.runs.get(record.id)
    assert (
        run is not None
        and run.failures == 1
        and run.last_error is not None
        and "injected launch failure" in run.last_error.message
    )


def test_open_resumes_started_processors_and_close_keeps_them_started(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=["k" * 16], spark_eager=False)
    stores = open_stores(data_dir=tmp_path)
    first = ProcessorManager(
        settings=settings,
        stores=stores,
        engine=FakeEngine(),
        connections=ConnectionRegistry(stores),
    )
    create(first)
    first.start("p")
    first.close()
    assert first.get("p").state is State.STARTED
    engine = FakeEngine()
    second = ProcessorManager(
        settings=settings, stores=stores, engine=engine, connections=ConnectionRegistry(stores)
    )
    second.recover()
    assert len(engine.launches) == 1 and engine.queries[0].is_active()
    assert second.runs.get(second.get("p").id) is not None
    second.close()
    stores.close()


# --------------------------------------------------------------------------- modify (§7.4)


def checkpointed(manager: ProcessorManager, name: str) -> None:
    manager.start(name)
    manager.stop(name)
    record = manager.get(name)
    (manager._settings.checkpoint_root / record.id / f"g{record.generation}").mkdir(
        parents=True, exist_ok=True
    )


def test_resumable_modify_keeps_source_and_window(manager: ProcessorManager) -> None:
    create(manager, pipeline=[SOURCE, WINDOW])
    checkpointed(manager, "p")
    other_source = {"$source": {"connectionName": "sample_stream_solar", "tsFieldName": "t"}}
    with pytest.raises(ModificationRejected) as caught:
        manager.modify("p", ProcessorModify(pipeline=[other_source, {"$match": {}}]))
    paths = {p.path for p in caught.value.problems}
    assert paths == {"/pipeline/0/$source", "/pipeline"}
    wider = json.loads(json.dumps(WINDOW))
    wider["$tumblingWindow"]["interval"]["size"] = 20
    with pytest.raises(ModificationRejected) as caught:
        manager.modify("p", ProcessorModify(pipeline=[SOURCE, wider]))
    assert [p.path for p in caught.value.problems] == ["/pipeline/1/$tumblingWindow/interval"]
    record, _ = manager.modify(
        "p", ProcessorModify(pipeline=[SOURCE, wider], options={"resumeFromCheckpoint": False})
    )
    assert record.generation == 2


def test_a_checkpoint_without_timers_refuses_a_wall_clock_rule_when_resumed(
    manager: ProcessorManager,
) -> None:
    """Spark's state of a window query has a timeout column only when the query has timeouts
    (`service.runtime.window_pins`): a checkpoint started without them cannot take one on."""
    create(manager, pipeline=[SOURCE, WINDOW])
    checkpointed(manager, "p")
    record = manager.get("p")
    checkpoint = manager._settings.checkpoint_root / record.id / f"g{record.generation}"
    record_timers(checkpoint, False)
    idle = json.loads(json.dumps(WINDOW))
    idle["$tumblingWindow"]["idleTimeout"] = {"size": 5, "unit": "second"}
    idle["$tumblingWindow"]["trigger"] = {"early": {"every": {"size": 1, "unit": "second"}}}
    with pytest.raises(ModificationRejected) as caught:
        manager.modify("p", ProcessorModify(pipeline=[SOURCE, idle]))
    assert [p.path for p in caught.value.problems] == [
        "/pipeline/1/$tumblingWindow/trigger",
        "/pipeline/1/$tumblingWindow/idleTimeout",
    ]
    assert "resumeFromCheckpoint: false" in caught.value.problems[0].message
    # Other changes still resume; a checkpoint with timers takes the rule.
    later = json.loads(json.dumps(WINDOW))
    later["$tumblingWindow"]["allowedLateness"] = {"size": 1, "unit": "second"}
    manager.modify("p", ProcessorModify(pipeline=[SOURCE, later]))
    record_timers(checkpoint, True)
    record, _ = manager.modify("p", ProcessorModify(pipeline=[SOURCE, idle]))
    assert record.generation == 1


def test_modify_renames_and_changes_the_dlq(manager: ProcessorManager) -> None:
    create(manager, dlq={"connectionName": "local", "db": "d", "coll": "c"})
    record, _ = manager.modify("p", ProcessorModify(name="q", options={"dlq": {}}))
    assert (record.name, dict(record.options)) == ("q", {})
    create(manager, name="p")
    with pytest.raises(ProcessorExists):
        manager.modify("q", ProcessorModify(name="p"))


def test_http_ingest_start_is_pinned_per_checkpoint(
    manager: ProcessorManager, tmp_path: Path
) -> None:
    from service.schemas.connections import HttpIngestConnectionCreate

    manager.connections.create(HttpIngestConnectionCreate(name="in1", type="HttpIngest"))
    spool = Spool(tmp_path)
    spool.append("in1", [b"x", b"y"])
    create(manager, pipeline=[{"$source": {"connectionName": "in1"}}])
    record = manager.start("p")
    pinned = manager.runs.get(record.id)
    assert pinned is not None
    assert pinned.request.compile.connections["in1"].config["startSeq"] == 2
    spool.append("in1", [b"z"])
    manager.stop("p")
    restarted = manager.start("p")
    run = manager.runs.get(restarted.id)
    assert run is not None and run.request.compile.connections["in1"].config["startSeq"] == 2
    assert (manager._settings.checkpoint_root / record.id / "g1" / START_FILE).exists()
    manager.stop("p")
    fresh = manager.start("p", resume=False)
    run = manager.runs.get(fresh.id)
    assert run is not None and run.request.compile.connections["in1"].config["startSeq"] == 3


class BrokenCompiler(FakeEngine):
    def check(self, request: Any) -> list[Any]:
        raise AttributeError("'NoneType' object has no attribute 'alias'")


def test_a_compiler_crash_is_a_422_not_a_500(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=["k" * 16])
    stores = open_stores(data_dir=tmp_path)
    broken = ProcessorManager(
        settings=settings,
        stores=stores,
        engine=BrokenCompiler(),
        connections=ConnectionRegistry(stores),
    )
    with pytest.raises(PipelineRejected) as caught:
        create(broken)
    assert [(p.code, p.path) for p in caught.value.problems] == [("compile_error", "/pipeline")]
    assert "has no attribute 'alias'" in caught.value.problems[0].message
    stores.close()


class NoSpark(FakeEngine):
    def driver_ids(self) -> dict[str, int]:
        from service.errors import EngineUnavailable

        raise EngineUnavailable("Spark failed to start: no java")


def test_resume_without_spark_leaves_processors_started(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, api_keys=["k" * 16], spark_eager=False)
    stores = open_stores(data_dir=tmp_path)
    first = ProcessorManager(
        settings=settings,
        stores=stores,
        engine=FakeEngine(),
        connections=ConnectionRegistry(stores),
    )
    create(first)
    first.start("p")
    first.close()
    second = ProcessorManager(
        settings=settings, stores=stores, engine=NoSpark(), connections=ConnectionRegistry(stores)
    )
    second.recover()
    assert second.get("p").state is State.STARTED
    assert second.stats(second.get("p"))["status"] == "starting"
    stores.close()


OVERLOAD = (
    "org.apache.spark.SparkException: Python worker failed to connect back.\n"
    "JVM stacktrace:\n\tat x"
)


def test_an_overloaded_machine_is_ridden_out_not_failed(manager: ProcessorManager) -> None:
    """Python workers that miss Spark's 10 s connect-back on a busy machine are retried
    past `restart_attempts` (2 here), with a capped backoff, and progress resets them."""
    create(manager)
    record = manager.start("p")
    engine = engine_of(manager)
    for attempt in range(1, OVERLOAD_ATTEMPTS + 1):
        engine.queries[-1].fail(OVERLOAD)
        manager.runs.tick()
        run = manager.runs.get(record.id)
        assert run is not None and manager.get("p").state is State.STARTED, attempt
        assert (run.overloads, run.failures) == (attempt, 0)
        assert run.retry_at is not None
        assert run.retry_at - time.monotonic() <= OVERLOAD_MAX_BACKOFF_SECONDS
        run.retry_at = 0
        manager.runs.tick()
    engine.progress(engine.queries[-1].query_id, {"batchId": 0, "numInputRows": 1})
    assert run.overloads == 0
    fail_and_restart(manager, record.id, OVERLOAD, times=OVERLOAD_ATTEMPTS + 1)
    failed = manager.get("p")
    assert failed.state is State.FAILED
    assert failed.error is not None
    assert (
        failed.error.message
        == "org.apache.spark.SparkException: Python worker failed to connect back."
    )


def test_only_workers_that_did_not_connect_back_count_as_overload() -> None:
    assert not is_overload("java.lang.RuntimeException: boom")
    assert is_overload('[CANNOT_OPEN_SOCKET] Can not open socket: ["tried to connect"]')
