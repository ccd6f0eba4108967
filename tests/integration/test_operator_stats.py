"""Per-operator stats of `$lookup`, `$cachedLookup` and `$https` on real Spark.

Each batch's counts are read inside the batch (`InputMetrics`, from the operators' observed
metrics), handed to the writer and added up in the processor stats as the service does; the
test checks them against what the pipeline and the local HTTP API (127.0.0.1) saw.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from service.manager.stats import LiveStats
from service.runtime.lookup_stores import StoreLookupOpener
from service.stores.secrets import SecretBox
from service.stores.sqlite import SqliteStores
from tests.integration.http_api import HttpApi, running_api
from tests.integration.recorded_query import start_recorded_query

pytestmark = pytest.mark.spark

FROM = {"connectionName": "local", "db": "shop", "coll": "products"}
#: Three micro-batches of three documents (`batchSize` 3, one partition each).
KEYS = ["a", "b", "a", "a", "c", "a", "b", "a", "b"]


class Recorder:
    """Counts each batch in the processor stats, as the service's writer does; a batch written
    again under its id (a replay) replaces the first attempt, here as in the stats."""

    def __init__(self) -> None:
        self.stats = LiveStats(input_from_progress=False)
        self.batches: dict[int, BatchResult] = {}

    @property
    def documents(self) -> int:
        return sum(len(batch.outputs) for batch in self.batches.values())

    @property
    def dlq(self) -> int:
        return sum(len(batch.dlq) for batch in self.batches.values())

    @property
    def outputs(self) -> list[dict[str, Any]]:
        return [json.loads(o.doc_json) for b in self.batches.values() for o in b.outputs]

    def write(self, batch: BatchResult) -> None:
        self.batches[batch.batch_id] = batch
        self.stats.record_batch(
            batch.batch_id,
            output_sizes=[len(o.doc_json) for o in batch.outputs],
            dlq_records=[
                (str(d.get("operatorName", "")), 1, str((d.get("errInfo") or {}).get("reason", "")))
                for d in batch.dlq
            ],
            window_stats=batch.stats,
            input_metrics=batch.input,
            sink_operators=batch.operators,
        )


@pytest.fixture(scope="module")
def api() -> Iterator[HttpApi]:
    with running_api() as running:
        yield running


def _operators(
    spark: Any,
    tmp_path: Path,
    pipeline: list[Any],
    total: int,
    *,
    prepare: Callable[[Any], None] | None = None,
    **ctx: Any,
) -> Any:
    """`({operator name: its verbose stats}, recorder)` of `pipeline` run to the end;
    `prepare` gets the `foreachBatch` sink before the query starts."""
    register_all(spark)
    context = CompileContext(
        spark=spark, processor_name="p", problems=ProblemCollector(), has_dlq=True, **ctx
    )
    compiled = compile_pipeline(parse_pipeline(pipeline), context)
    name = f"ops_{uuid.uuid4().hex[:8]}"
    recorder = Recorder()
    query, sink = start_recorded_query(
        spark, compiled, recorder, name=name, checkpoint=tmp_path / "checkpoint", prepare=prepare
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        sink.close()
    assert recorder.documents + recorder.dlq == total
    public = recorder.stats.public(
        name="p",
        processor_id="p",
        status="running",
        last_state_change=datetime.now(tz=UTC),
        operators=["SourceOperator"],
        verbose=True,
    )
    return {o["name"]: o for o in public["operatorStats"]}, recorder


def _products(tmp_path: Path) -> StoreLookupOpener:
    """The `local` store with products `a`, `b`, `c` (`FROM`), opened for the lookups."""
    stores = SqliteStores(str(tmp_path / "sluice.db"), secrets=SecretBox.load(data_dir=tmp_path))
    stores.documents.merge("shop", "products", [{"_id": k, "n": i} for i, k in enumerate("abc")])
    stores.close()
    return StoreLookupOpener(f"sqlite:///{tmp_path / 'sluice.db'}")


def test_lookup_and_cached_lookup_report_counts_latency_and_cache_use(
    spark: Any, tmp_path: Path
) -> None:
    pipeline = [
        {
            "$source": {
                "documents": [{"i": i, "k": k} for i, k in enumerate(KEYS)],
                "config": {"batchSize": 3},
            }
        },
        {"$lookup": {"from": FROM, "localField": "k", "foreignField": "_id", "as": "p"}},
        {
            "$cachedLookup": {
                "ttl": {"size": 1, "unit": "hour"},
                "maxMemUsageBytes": 1_000_000,
                "from": FROM,
                "localField": "k",
                "foreignField": "_id",
                "as": "q",
            }
        },
    ]
    operators, _ = _operators(
        spark,
        tmp_path,
        pipeline,
        len(KEYS),
        lookup_stores=_products(tmp_path),
    )
    lookup = operators["LookUpOperator"]
    assert (lookup["inputMessageCount"], lookup["outputMessageCount"]) == (9, 9)
    # One store query per partition, i.e. per micro-batch here.
    assert lookup["latencyMs"]["samples"] == 3
    assert 0 < lookup["latencyMs"]["p50"] <= lookup["latencyMs"]["p99"]
    cached = operators["CachedLookUpOperator"]
    assert (cached["inputMessageCount"], cached["outputMessageCount"]) == (9, 9)
    # One cache look-up per distinct key per batch: {a, b}, {a, c}, {a, b}.
    assert cached["cacheHitCount"] + cached["cacheMissCount"] == 6
    # Each key misses at least once (in each Python worker that sees it), never more than
    # once per batch; a store query is made only for batches with a miss.
    assert 3 <= cached["cacheMissCount"] <= 6
    assert 1 <= cached["latencyMs"]["samples"] <= 3
    assert "cacheHitCount" not in lookup


def test_https_reports_requests_latency_and_failures(
    spark: Any, tmp_path: Path, api: HttpApi
) -> None:
    docs = [{"n": 1, "p": "/slow/30"}, {"n": 2, "p": "/users/u2"}, {"n": 3, "p": "/status/404"}]
    pipeline = [
        {"$source": {"documents": docs, "config": {"batchSize": 3}}},
        {"$https": {"connectionName": "api", "path": "$p", "as": "r"}},
        {"$match": {}},
    ]
    connection = ConnectionInfo("api", "Https", {"url": api.url})
    operators, recorder = _operators(
        spark, tmp_path, pipeline, len(docs), connections={"api": connection}
    )
    https = operators["HttpsOperator"]
    assert (https["inputMessageCount"], https["outputMessageCount"]) == (3, 2)
    assert https["dlqMessageCount"] == recorder.dlq == 1
    assert https["latencyMs"]["samples"] == 3
    # The 30 ms response is the slowest of three: p99 is at least its bucket's bound.
    assert https["latencyMs"]["p99"] >= 50


def replay_every_fold(sink: Any) -> None:
    """Makes the batch engine fold and write every micro-batch twice under its id, as a
    replay after a crash between the write and Spark's commit does."""
    window = sink.window
    fold = window.fold

    def replayed(batch: Any) -> list[Any]:
        sink.write_envelopes(batch.batch_id, fold(batch), batch.input)
        return fold(batch)

    window.fold = replayed


@pytest.mark.parametrize("replayed", [False, True], ids=["once", "replayed"])
def test_lookup_after_a_window_on_the_batch_engine_reports_the_window_results(
    spark: Any, tmp_path: Path, replayed: bool
) -> None:
    # The batch engine runs the stages after the window as a Spark job of its own per
    # micro-batch; the lookup's counts come from that job, with the same batch, so a
    # replayed batch replaces them.
    def doc(i: int, k: str, second: int) -> dict[str, Any]:
        return {"i": i, "k": k, "t": f"2024-01-01T00:00:{second:02d}Z"}

    # Windows of 10 s: [0, 10) closes at the document of second 12, [10, 20) at second 25,
    # [20, 30) stays open; micro-batches of two documents.
    docs = [doc(0, "a", 1), doc(1, "b", 2), doc(2, "a", 3), doc(3, "c", 12), doc(4, "a", 25)]
    pipeline = [
        {
            "$source": {
                "documents": docs,
                "timeField": {"$dateFromString": {"dateString": "$t"}},
                "config": {"batchSize": 2},
            }
        },
        {
            "$tumblingWindow": {
                "interval": {"size": 10, "unit": "second"},
                "allowedLateness": 0,
                "pipeline": [{"$group": {"_id": "$k", "n": {"$count": {}}}}],
            }
        },
        {"$lookup": {"from": FROM, "localField": "_id", "foreignField": "_id", "as": "p"}},
    ]
    operators, recorder = _operators(
        spark,
        tmp_path,
        pipeline,
        3,
        lookup_stores=_products(tmp_path),
        window_engine="batch",
        prepare=replay_every_fold if replayed else None,
    )
    assert sorted((d["_id"], d["n"], d["p"][0]["n"]) for d in recorder.outputs) == [
        ("a", 2, 0),
        ("b", 1, 1),
        ("c", 1, 2),
    ]
    lookup = operators["LookUpOperator"]
    # Every window result went through the lookup, once: none from the open window.
    assert lookup["inputMessageCount"] == lookup["outputMessageCount"] == recorder.documents
    assert lookup["latencyMs"]["samples"] >= 1


def test_stages_between_source_and_sink_report_their_input_and_output(
    spark: Any, tmp_path: Path
) -> None:
    """`$match` and `$addFields` count nothing themselves: the plan counts the healthy
    documents that enter and leave them (issue 27: they reported neither)."""
    docs = [{"i": i, "d": 0 if i in (2, 5) else 1} for i in range(9)]
    pipeline = [
        {"$source": {"documents": docs, "config": {"batchSize": 3}}},
        {"$match": {"i": {"$lt": 7}}},  # 7 of 9 pass
        {"$addFields": {"r": {"$divide": [1, "$d"]}}},  # i = 2 and 5 go to the DLQ
        {"$project": {"i": 1, "r": 1}},
    ]
    operators, recorder = _operators(spark, tmp_path, pipeline, 7)
    passed = sum(1 for doc in docs if doc["i"] < 7)
    failed = sum(1 for doc in docs if doc["i"] < 7 and doc["d"] == 0)
    match = operators["MatchOperator"]
    assert (match["inputMessageCount"], match["outputMessageCount"]) == (len(docs), passed)
    add_fields = operators["AddFieldsOperator"]
    assert add_fields["inputMessageCount"] == passed
    assert add_fields["outputMessageCount"] == passed - failed
    assert add_fields["dlqMessageCount"] == recorder.dlq == failed
    project = operators["ProjectOperator"]
    assert project["inputMessageCount"] == project["outputMessageCount"] == recorder.documents
    assert "latencyMs" not in match  # no latency is measured for them


def test_a_windows_inner_stages_report_their_input_output_and_state(
    spark: Any, tmp_path: Path
) -> None:
    """Inside a window: the stages before `$group` are counted as in the main pipeline, the
    `$group` shows the documents reaching it, its state and its open windows, the stage after
    it the window's results (issue 27: stages inside a window reported nothing)."""
    # Event times in seconds: windows [0, 10) and [10, 20) close; [20, 30) stays open.
    times = [1, 2, 3, 11, 12, 4, 13, 21, 22]
    docs = [
        {"t": {"$date": f"2024-01-01T00:00:{s:02d}Z"}, "k": "ab"[i % 2], "keep": i != 1}
        for i, s in enumerate(times)
    ]
    body = {
        "interval": {"size": 10, "unit": "second"},
        "allowedLateness": {"size": 0, "unit": "second"},
        "pipeline": [
            {"$match": {"keep": True}},
            {"$group": {"_id": "$k", "n": {"$sum": 1}}},
            {"$project": {"n": 1}},
        ],
    }
    pipeline = [
        {"$source": {"documents": docs, "timeField": "$t", "config": {"batchSize": 3}}},
        {"$tumblingWindow": body},
    ]
    operators, recorder = _operators(spark, tmp_path, pipeline, 4)
    late = [d for d in recorder.batches.values() for d in d.dlq]
    assert len(late) == 1 and late[0]["errInfo"]["reason"] == "Input document arrived late."
    match = operators["MatchOperator"]
    assert (match["inputMessageCount"], match["outputMessageCount"]) == (len(docs), len(docs) - 1)
    group = operators["GroupOperator"]
    assert group["inputMessageCount"] == len(docs) - 1  # the late one too: $group DLQs it
    assert group["minOpenWindowStartTime"] == group["maxOpenWindowStartTime"]
    assert group["minOpenWindowStartTime"] == "2024-01-01T00:00:20.000Z"
    assert group["stateSize"] > 0
    project = operators["ProjectOperator"]
    # [0, 10): a twice (the b was dropped; the 4 s one is late); [10, 20): a twice, b once.
    results = sorted((d["_id"], d["n"]) for d in recorder.outputs)
    assert results == [("a", 2), ("a", 2), ("b", 1)]
    assert project["inputMessageCount"] == project["outputMessageCount"] == len(results)
