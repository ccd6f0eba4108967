"""The batch window engine (`spark.sluice.window.engine=batch`) on real Spark.

Its results must be the operator's: the same seeded streams as `test_window_operator.py`,
micro-batches of 1, 10 and 1000 documents, against the reference model and the operator
itself. Its state lives in the driver, saved per batch id: a replayed batch (Spark replays
the last batch after a crash, with the same id) must produce the same envelopes, and a
restarted query must continue where the stopped one left off. The planner runs it on every
window without a wall-clock rule, and the operator on the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._base import PipelineInvalid
from pipeline_stages._windowing.batch.engine import ENGINE_CONF
from pipeline_stages._windowing.batch.input_log import INPUT_DIR, InputLog
from pipeline_stages._windowing.batch.pipelining import WindowFoldError
from pipeline_stages._windowing.runtime.config import OMETA
from tests.conformance.harness import TranscriptMismatch
from tests.conformance.reference_model import ReferenceExecutor
from tests.conformance.spark_executor import (
    SparkBatchExecutor,
    SparkExecutor,
    SparkStampedExecutor,
    spark_confs,
    spark_session,
    stop_active,
)
from tests.integration.test_window_operator import (
    BASE_MS,
    GROUP,
    canonical,
    ms,
    pipeline,
    run,
    stream,
    windows,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LATE = "Input document arrived late."


def batch_windows(inner: list[dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """The window stages of `test_window_operator`, without `idleTimeout` (a wall-clock
    rule: the batch engine does not run those)."""
    found = {}
    for kind, stage in windows(inner or [GROUP]).items():
        ((key, body),) = stage.items()
        found[kind] = {key: {k: v for k, v in body.items() if k != "idleTimeout"}}
    return found


def batch_windows_with(*after: dict[str, Any]) -> dict[str, Any]:
    """The tumbling stage of `batch_windows` with stateless stages after its `$group`."""
    ((key, body),) = batch_windows()["tumbling"].items()
    return {key: {**body, "pipeline": [*body["pipeline"], *after]}}


PROCESSING_TIME = {
    "$tumblingWindow": {"interval": ms(2000), "boundary": "processingTime", "pipeline": [GROUP]}
}


@pytest.fixture(scope="module", autouse=True)
def _stop_queries() -> Any:
    yield
    stop_active()


@pytest.mark.parametrize("kind", ["tumbling", "hopping", "session", "sliding"])
def test_batch_engine_gives_the_operators_results_at_every_batch_size(kind: str) -> None:
    stages = pipeline(batch_windows()[kind])
    steps = stream(seed=7)
    reference = run(ReferenceExecutor(), stages, steps, batch=1)
    operator = run(SparkExecutor(), stages, steps, batch=1000)
    runs = {size: run(SparkBatchExecutor(), stages, steps, batch=size) for size in (1, 10, 1000)}
    for size, (emitted, dlq) in runs.items():
        assert canonical(emitted) == canonical(reference[0]), f"batch size {size}"
        assert canonical(dlq) == canonical(reference[1]), f"batch size {size}"
    # The same documents in the same order as the operator, whatever the micro-batch size.
    assert runs[1] == runs[10] == runs[1000] == operator
    assert any(r["errInfo"]["reason"] == LATE for r in operator[1])
    assert any("GroupOperator with error" in r["errInfo"]["reason"] for r in operator[1])


def test_stages_before_the_window_reach_the_batch_engine_and_the_dlq_copies() -> None:
    before = [
        {"$addFields": {"twice": {"$multiply": ["$v", 2]}}},
        {"$match": {"id": {"$ne": 3}}},
    ]
    source, window = pipeline(batch_windows()["hopping"])
    stages = [source, *before, window]
    steps = stream(seed=11)
    operator = run(SparkExecutor(), stages, steps, batch=1000)
    by_size = {size: run(SparkBatchExecutor(), stages, steps, batch=size) for size in (1, 1000)}
    assert by_size[1] == by_size[1000] == operator
    # A late document's DLQ copy is the document as it entered the window.
    late = [r for r in operator[1] if r["errInfo"]["reason"] == LATE]
    assert late and all(r["doc"]["twice"] == 2 * r["doc"]["v"] for r in late)
    assert all(r["doc"]["id"] != 3 for r in operator[1])


#: One value of every kind a document can hold, for the late documents' DLQ copies: the
#: batch engine ships them as VARIANT binaries and renders them in Python, the operator as
#: Spark's `to_json` text.
VALUES: list[Any] = [
    0, -1, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 0.1, -0.0, 1.0, 2.5, 1e20, 1e-7, 1.5e300,
    5e-324, -123.456e-10, "", "plain", "quote \" backslash \\ slash /", "tab\tnew\nline\u0001",
    "ünïcödé ✓ 😀", True, False, None, {}, [], {"a": [1, {"b": [None, 2.5, "x"]}]},
    [[], [[]], {"c": {}}], {"$numberDecimal": "1.10"}, {"$numberDecimal": "-0.000001234"},
    {"$numberLong": "5"}, {"$numberDouble": "NaN"}, {"$numberDouble": "-Infinity"},
    {"$date": "2024-02-29T12:34:56.789Z"}, {"$oid": "65f0a1b2c3d4e5f601234567"},
]  # fmt: skip


def test_late_documents_dlq_copies_are_the_operators_for_every_kind_of_value() -> None:
    computed = {
        "$addFields": {
            "third": {"$divide": ["$id", 3]},
            "when": {"$toDate": "$ts"},
            "dec": {"$toDecimal": 1.5},
            "long": {"$toLong": "$id"},
            "parts": {"$split": ["a,b", ","]},
        }
    }
    source, window = pipeline(batch_windows()["tumbling"])
    stages = [source, computed, window]
    far = {
        "id": 0,
        "k": "a",
        "v": 1,
        "d": 1,
        "ts": {"$date": {"$numberLong": str(BASE_MS + 60_000)}},
    }
    late = [
        {"id": n, "k": "b", "v": 1, "d": 1, "val": value, "ts": {"$date": {"$numberLong": str(BASE_MS + n)}}}
        for n, value in enumerate(VALUES, start=1)
    ]  # fmt: skip
    steps = [far, *late]
    operator = run(SparkExecutor(), stages, steps, batch=1000)
    batch = run(SparkBatchExecutor(), stages, steps, batch=1000)
    copies = [r for r in operator[1] if r["errInfo"]["reason"] == LATE]
    assert len(copies) == len(VALUES)
    assert batch == operator
    # `==` takes 1 for 1.0; the canonical form keeps ints, doubles and decimals apart.
    assert canonical(batch[1]) == canonical(operator[1])


def run_wrapped(
    wrapper: Callable[[Any], Any], stages: list[dict[str, Any]], steps: list[Any]
) -> tuple[Any, list[Any]]:
    """`run` through the batch engine, 3 documents per micro-batch, with the engine wrapped
    by `wrapper`; returns the results and the wrappers."""
    wrappers: list[Any] = []

    def wrap(window: Any) -> Any:
        wrappers.append(wrapper(window))
        return window

    executor = SparkBatchExecutor()
    executor.window_wrapper = wrap
    return run(executor, stages, steps, batch=3), wrappers


class ReplayingWindow:
    """Makes a batch engine run every micro-batch twice under its batch id, as Spark's
    replay after a crash that followed the state save would, and checks that both agree."""

    def __init__(self, window: Any) -> None:
        self.replays = 0
        self.once = window.run_table
        window.run_table = self.run_table

    def run_table(self, table: Any, batch_id: int, now: int) -> list[tuple[Any, ...]]:
        first = self.once(table, batch_id, now)
        again = self.once(table, batch_id, now)
        assert again == first, f"batch {batch_id} replayed differently"
        self.replays += 1
        return first


def test_a_replayed_batch_gives_the_same_envelopes_and_state() -> None:
    stages = pipeline(batch_windows()["hopping"])
    steps = stream(seed=7)
    expected = run(SparkBatchExecutor(), stages, steps, batch=3)
    found, wrappers = run_wrapped(ReplayingWindow, stages, steps)
    assert found == expected
    assert wrappers[0].replays >= 5  # every micro-batch with documents was replayed


def test_a_restarted_query_continues_from_the_saved_state() -> None:
    stages = pipeline(batch_windows()["tumbling"])
    steps = [s for s in stream(seed=7) if not isinstance(s, int)]
    expected = run(SparkBatchExecutor(), stages, steps, batch=4)
    executor = SparkBatchExecutor()
    executor.start(stages)
    emitted: list[Any] = []
    dlq: list[Any] = []
    for n, step in enumerate(steps, start=1):
        executor.feed([step])
        if n % 4 == 0:
            out, dead = executor.drain()
            emitted += out
            dlq += dead
        if n == 8:
            executor.restart()
    out, dead = executor.drain()
    emitted += out
    dlq += dead
    volatile = ("_id", "dlqTime", "processorName")
    dlq = [{k: v for k, v in r.items() if k not in volatile} for r in dlq]
    assert (emitted, dlq) == expected
    state_dir = Path(executor.directory, "window-state")
    saved = sorted(p.name for p in state_dir.iterdir() if p.is_file())
    assert not list((state_dir / INPUT_DIR).iterdir())  # every logged batch was folded
    # A snapshot, then the deltas of the batches after it (`batch.state`).
    assert saved[0].endswith(".state") and len(saved) >= 2, saved
    assert all(name.endswith(".delta") for name in saved[1:]), saved


class ReloadingWindow:
    """Makes a batch engine read its state back from its files before every micro-batch, as
    a restart would, and records the state files after each batch."""

    def __init__(self, window: Any) -> None:
        self.window = window
        self.once = window.run_table
        self.kinds: set[str] = set()
        window.run_table = self.run_table

    def run_table(self, table: Any, batch_id: int, now: int) -> list[tuple[Any, ...]]:
        self.window.bind(self.window.state_dir)
        found = self.once(table, batch_id, now)
        self.kinds |= {path.suffix for path in self.window.state_dir.iterdir() if path.is_file()}
        return found


@pytest.mark.parametrize("kind", ["tumbling", "hopping", "pass-through"])
def test_state_read_back_from_snapshot_and_deltas_before_every_batch_gives_the_same_results(
    kind: str,
) -> None:
    if kind == "pass-through":  # buffered documents instead of `$group` groups
        stages = pipeline(batch_windows([{"$addFields": {"x": 1}}])["hopping"])
    else:
        stages = pipeline(batch_windows()[kind])
    steps = stream(seed=11)
    expected = run(SparkBatchExecutor(), stages, steps, batch=3)
    found, wrappers = run_wrapped(ReloadingWindow, stages, steps)
    assert found == expected
    assert wrappers[0].kinds == {".state", ".delta"}


@pytest.mark.parametrize(
    ("name", "stage", "runs"),
    [
        ("tumbling $group", batch_windows()["tumbling"], True),
        ("session", batch_windows()["session"], True),
        ("pass-through", batch_windows([{"$addFields": {"x": 1}}])["hopping"], True),
        ("stages after $group", batch_windows_with({"$set": {"x": 1}}), True),
        ("idleTimeout", windows([GROUP])["tumbling"], False),
        ("processingTime", PROCESSING_TIME, False),
    ],
)
def test_the_planner_runs_the_batch_engine_on_windows_without_a_wall_clock_rule(
    name: str, stage: dict[str, Any], runs: bool
) -> None:
    executor = SparkExecutor()
    try:
        with spark_confs(spark_session(), {ENGINE_CONF: "batch"}):
            executor.start(pipeline(stage))
    finally:
        stop_active()
    assert (executor.compiled.batch_window is not None) is runs, name


def test_an_unknown_engine_is_a_compile_problem_naming_the_window() -> None:
    try:
        with spark_confs(spark_session(), {ENGINE_CONF: "fast"}):
            # The executor reports a refused pipeline as a transcript mismatch, caused by the
            # compiler's `PipelineInvalid`.
            with pytest.raises(TranscriptMismatch) as raised:
                SparkExecutor().start(pipeline(batch_windows()["tumbling"]))
    finally:
        stop_active()
    refused = raised.value.__cause__
    assert isinstance(refused, PipelineInvalid)
    assert any(
        p.path == "/pipeline/1/$tumblingWindow" and "'fast'" in p.message for p in refused.problems
    )


class FailingOnceWindow:
    """Makes a batch engine's fold of batch `batch_id` fail once, as a bug or a full disk
    would; the batches before it fold as usual."""

    def __init__(self, window: Any, batch_id: int = 2) -> None:
        self.window = window
        self.batch_id = batch_id
        self.failed = False
        self.once = window.run_table
        window.run_table = self.run_table

    def run_table(self, table: Any, batch_id: int, now: int) -> list[tuple[Any, ...]]:
        if batch_id == self.batch_id and not self.failed:
            self.failed = True
            raise OSError("no space left on device")
        return self.once(table, batch_id, now)


def test_a_failed_fold_fails_the_query_and_a_restart_folds_the_logged_batch() -> None:
    stages = pipeline(batch_windows()["tumbling"])
    steps = [s for s in stream(seed=7) if not isinstance(s, int)]
    expected = run(SparkBatchExecutor(), stages, steps, batch=4)
    executor = SparkBatchExecutor()
    wrappers: list[FailingOnceWindow] = []
    executor.window_wrapper = lambda window: wrappers.append(FailingOnceWindow(window))
    executor.start(stages)
    executor.window_wrapper = None  # a restart keeps the wrapped engine as it is
    emitted: list[Any] = []
    dlq: list[Any] = []
    state_dir = Path(executor.directory, "window-state")
    for batch_id, at in enumerate(range(0, len(steps), 4)):
        for step in steps[at : at + 4]:
            executor.feed([step])
        if batch_id == 2:
            with pytest.raises(WindowFoldError, match="batch 2 failed: no space left on device"):
                executor.drain()
            # Spark committed it: it stays logged for the restart.
            assert InputLog(state_dir / INPUT_DIR).batch_ids() == [2]
            executor.restart()  # the same engine object, whose fold works now
            continue
        out, dead = executor.drain()  # batch 3's folds the logged batch 2 first
        emitted += out
        dlq += dead
    volatile = ("_id", "dlqTime", "processorName")
    dlq = [{k: v for k, v in r.items() if k not in volatile} for r in dlq]
    assert wrappers[0].failed
    assert (emitted, dlq) == expected
    assert InputLog(state_dir / INPUT_DIR).batch_ids() == []


class Stamps:
    """Records how the batch engine stamps late copies (`BatchWindow.stamp`)."""

    def __init__(self, window: Any) -> None:
        self.stamp = window.stamp


#: Documents with a stamped field of their own (an object to merge into, a date and a number
#: to replace, a user `_ts`) and keys in different orders by UTF-16 unit and by code point.
OWN_FIELDS: list[dict[str, Any]] = [
    {"_stream_meta": {"mine": 1, "source": "theirs", "z": [1]}},
    {"_stream_meta": {"$date": "2024-01-01T00:00:00.000Z"}},
    {"_stream_meta": 5},
    {"_ts": "user's own"},
    {"origin": {"source": 1, "b": 2}, "arrival": 7},
    {"\uffff": 1, "😀": 2, "a": 3},
]


def reads_unstamped(envelopes: Any) -> bool:
    """Whether a compiled operator query ships stream metadata for stamping late copies
    (`C.OMETA`): it reads the source's unstamped documents."""
    return OMETA in envelopes._jdf.queryExecution().analyzed().toString()


@pytest.mark.parametrize(
    ("fields", "stamp"),
    [
        ({}, ("_ts", "_stream_meta")),
        ({"tsFieldName": "arrival", "streamMetaFieldName": "origin"}, ("arrival", "origin")),
        ({"streamMetaFieldName": ""}, ("_ts", "")),
    ],
)
def test_unstamped_documents_dlq_copies_are_stamped_as_the_source_stamps_them(
    fields: dict[str, Any], stamp: tuple[str, str]
) -> None:
    source, window = pipeline(batch_windows()["tumbling"])
    stages = [{"$source": {**source["$source"], **fields}}, window]
    far_ms = BASE_MS + 60_000
    far = {"id": 0, "k": "a", "v": 1, "d": 1, "ts": {"$date": {"$numberLong": str(far_ms)}}}
    late = [
        {"id": n, "k": "b", "v": 1, "d": 1, "val": value, **OWN_FIELDS[n % len(OWN_FIELDS)], "ts": {"$date": {"$numberLong": str(BASE_MS + n)}}}
        for n, value in enumerate(VALUES, start=1)
    ]  # fmt: skip
    # On time, failing inside the window ($divide by zero): copied in Spark, stamped.
    failing = [
        {"id": 900 + n, "k": "c", "v": 1, "d": 0, **own, "ts": {"$date": {"$numberLong": str(far_ms + n)}}}
        for n, own in enumerate(OWN_FIELDS)
    ]  # fmt: skip
    steps = [far, *late, *failing]
    stamped = SparkStampedExecutor()
    expected = run(stamped, stages, steps, batch=1000)
    assert not reads_unstamped(stamped.compiled.envelopes)
    reasons = [r["errInfo"]["reason"] for r in expected[1]]
    assert reasons.count(LATE) == len(VALUES)
    assert sum("GroupOperator" in r for r in reasons) == len(OWN_FIELDS)
    operator = SparkExecutor()
    by_operator = run(operator, stages, steps, batch=1000)
    assert reads_unstamped(operator.compiled.envelopes)
    by_batch, wrappers = run_wrapped(Stamps, stages, steps)
    assert wrappers[0].stamp == stamp

    # The late copies' field order too: a VARIANT object's, which Spark's stamp keeps.
    def late_texts(dlq: list[dict[str, Any]]) -> list[str]:
        return [json.dumps(r["doc"]) for r in dlq if r["errInfo"]["reason"] == LATE]

    for engine, result in (("operator", by_operator), ("batch engine", by_batch)):
        assert result == expected, engine
        assert canonical(result[1]) == canonical(expected[1]), engine
        assert late_texts(result[1]) == late_texts(expected[1]), engine


@pytest.mark.parametrize(
    ("name", "stages", "unstamped"),
    [
        ("$group right after the source", [batch_windows()["tumbling"]], True),
        ("session, partitionBy", [batch_windows()["session"]], True),
        ("$match inside, then $group", [batch_windows([{"$match": {"k": "a"}}, GROUP])["hopping"]], True),
        ("$count", [batch_windows([{"$count": "n"}])["tumbling"]], True),
        ("a stage before the window", [{"$match": {"k": "a"}}, batch_windows()["tumbling"]], False),
        ("$addFields inside", [batch_windows([{"$addFields": {"x": 1}}, GROUP])["tumbling"]], False),
        ("no $group", [batch_windows([{"$sort": {"id": 1}}])["tumbling"]], False),
        ("$group reads _ts", [batch_windows([{"$group": {"_id": "$k", "t": {"$max": "$_ts"}}}])["tumbling"]], False),
        ("$group reads $$ROOT", [batch_windows([{"$group": {"_id": "$k", "d": {"$push": "$$ROOT"}}}])["tumbling"]], False),
        ("$getField of _stream_meta", [batch_windows([{"$group": {"_id": {"$getField": "_stream_meta"}}}])["tumbling"]], False),
        ("window meta before $group", [batch_windows([{"$group": {"_id": {"$meta": "stream.window.start"}}}])["tumbling"]], False),
    ],
)  # fmt: skip
def test_the_engines_read_unstamped_documents_only_when_nothing_reads_the_stamp(
    name: str, stages: list[dict[str, Any]], unstamped: bool
) -> None:
    source, _ = pipeline(batch_windows()["tumbling"])
    batch, operator = SparkBatchExecutor(), SparkExecutor()
    try:
        batch.start([source, *stages])
        operator.start([source, *stages])
    finally:
        stop_active()
    assert (batch.compiled.batch_window.stamp is not None) is unstamped, name
    assert reads_unstamped(operator.compiled.envelopes) is unstamped, name
