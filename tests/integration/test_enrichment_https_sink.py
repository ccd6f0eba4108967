"""`$https` as the last stage: the writer against a real API on 127.0.0.1, end to end, and its
operator stats on real Spark (counted once per micro-batch, also when Spark replays one)."""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline, parse_stage
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sinks.dispatch import build_sink_writer
from pipeline_stages._connectors.sinks.https_writer import (
    HttpsSinkFailed,
    HttpsSinkPlan,
    HttpsSinkWriter,
    plan_https,
)
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import BatchResult, Output
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from service.manager.stats import LiveStats
from service.manager.view import operator_names
from service.manager.writers import ProcessorWriter, SampleBuffer
from service.runtime.process import run_process
from service.runtime.sink_resources import (
    ClusterClients,
    StoreSinkResources,
    build_run_partition_sink,
)
from service.stores import open_stores
from tests.integration.http_api import HttpApi, running_api
from tests.integration.recorded_query import start_recorded_query


@pytest.fixture
def api() -> Iterator[HttpApi]:
    with running_api() as running:
        yield running


def connection(api: HttpApi) -> ConnectionInfo:
    return ConnectionInfo("api", "Https", {"url": api.url, "headers": {"X-Key": "k"}})


def plan(api: HttpApi, **body: Any) -> HttpsSinkPlan:
    spec = parse_stage({"$https": {"connectionName": "api", **body}}).spec
    problems = ProblemCollector()
    made = plan_https(
        spec, connection_of=lambda _: connection(api), path="/pipeline/2", problems=problems
    )
    assert made is not None, problems
    return made


def batch(*docs: dict[str, Any], batch_id: int = 0) -> BatchResult:
    outputs = [Output(json.dumps(d), key=f"key-{d['n']}") for d in docs]
    return BatchResult(batch_id=batch_id, outputs=outputs)


def test_one_request_per_output_with_its_id_and_replays_dedup(api: HttpApi) -> None:
    writer = HttpsSinkWriter(plan(api, path="/sink", method="POST"), connection(api), processor="p")
    first = batch(*({"n": i} for i in range(5)))
    assert writer.write(first) == []
    # The micro-batch replayed after a crash: same outputs, same keys.
    assert writer.write(batch(*({"n": i} for i in range(5)))) == []
    assert api.sink_requests == 10
    assert sorted(api.sink) == [f"key-{i}" for i in range(5)]
    assert json.loads(api.sink["key-3"]) == {"n": 3}


def test_failures_go_to_the_dlq_or_fail_the_batch(api: HttpApi) -> None:
    failing = plan(
        api, path="/status/502", method="POST", config={"maxRetries": 1, "retryBackoffMs": 1}
    )
    records = HttpsSinkWriter(failing, connection(api), processor="p").write(batch({"n": 1}))
    (record,) = records
    assert record["operatorName"] == "HttpsOperator"
    assert record["doc"] == {"n": 1}
    assert "status 502 after 2 attempt(s)" in record["errInfo"]["reason"]
    ignoring = plan(api, path="/status/502", onError="ignore", config={"maxRetries": 0})
    assert HttpsSinkWriter(ignoring, connection(api), processor="p").write(batch({"n": 1})) == []
    fail = plan(api, path="/status/404", onError="fail")
    with pytest.raises(HttpsSinkFailed, match="status 404"):
        HttpsSinkWriter(fail, connection(api), processor="p").write(batch({"n": 1}))


def test_dispatch_builds_the_writer(api: HttpApi) -> None:
    class Resources:
        def connection(self, name: str) -> ConnectionInfo:
            return connection(api)

        def documents(self, connection: str) -> Any:
            raise AssertionError

        def mongo_client(self, connection: str) -> Any:
            raise AssertionError

    writer = build_sink_writer(plan(api, path="/sink"), Resources(), processor="p", run_tag="t")
    assert isinstance(writer, HttpsSinkWriter)


def test_payload_is_refused_in_the_sink_form(api: HttpApi) -> None:
    spec = parse_stage(
        {"$https": {"connectionName": "api", "payload": [{"$project": {"a": 1}}]}}
    ).spec
    problems = ProblemCollector()
    assert (
        plan_https(
            spec, connection_of=lambda _: connection(api), path="/pipeline/1", problems=problems
        )
        is None
    )
    assert [(p.code, p.path) for p in problems.problems] == [
        ("unsupported_option", "/pipeline/1/$https/payload")
    ]


@pytest.mark.spark
def test_a_pipeline_ending_in_https_posts_every_output(spark: Any, api: HttpApi) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = run_process(
        [
            {"$source": {"documents": [{"n": i, "to": "sink"} for i in range(7)]}},
            {"$set": {"double": {"$multiply": ["$n", 2]}}},
            {"$https": {"connectionName": "api", "path": "$to", "method": "POST"}},
        ],
        out=out,
        err=err,
        batch_size=3,
        max_seconds=120,
        spark_factory=lambda: spark,
        connections={"api": connection(api)},
    )
    assert code == 0, err.getvalue()
    assert out.getvalue() == ""  # the sink took the outputs
    assert api.sink_requests == 7
    sent = sorted(json.loads(body)["n"] for body in api.sink.values())
    assert sent == list(range(7))
    assert all(
        json.loads(body)["double"] == 2 * json.loads(body)["n"] for body in api.sink.values()
    )
    assert len(set(api.sink)) == 7


#: Nine outputs in three micro-batches; two of them go to a path the API answers 404.
REFUSED = (2, 7)
STATS_DOCS = [{"n": n, "to": "/status/404" if n in REFUSED else "/sink"} for n in range(9)]


def _run_recorded(spark: Any, compiled: Any, writer: Any, checkpoint: Path) -> None:
    """Run the query until the source has nothing more, then stop it (Spark drives the
    micro-batches; `processAllAvailable` returns once every batch is committed)."""
    name = f"https_sink_{uuid.uuid4().hex[:8]}"
    query, sink = start_recorded_query(spark, compiled, writer, name=name, checkpoint=checkpoint)
    try:
        query.processAllAvailable()
    finally:
        query.stop()
        sink.close()


def _https_stats(stats: LiveStats, pipeline: list[Any]) -> dict[str, Any]:
    operators, _ = operator_names(pipeline)
    public = stats.public(
        name="p",
        processor_id="p",
        status="running",
        last_state_change=datetime.now(tz=UTC),
        operators=operators,
        verbose=True,
    )
    return {o["name"]: o for o in public["operatorStats"]}["HttpsOperator"]


@pytest.mark.spark
def test_the_sink_reports_its_requests_once_per_batch_across_a_replay(
    spark: Any, api: HttpApi, tmp_path: Path
) -> None:
    pipeline = [
        {"$source": {"documents": STATS_DOCS, "config": {"batchSize": 3}}},
        {"$https": {"connectionName": "api", "path": "$to", "method": "POST"}},
    ]
    register_all(spark)
    parsed = parse_pipeline(pipeline)
    context = CompileContext(
        spark=spark,
        processor_name="p",
        problems=ProblemCollector(),
        has_dlq=True,
        connections={"api": connection(api)},
    )
    compiled = compile_pipeline(parsed, context)
    # The sink as the service builds it: written on the executors, per partition.
    resources = StoreSinkResources(
        local=lambda: pytest.fail("the $https sink opened local"),
        connections={"api": connection(api)},
        clients=ClusterClients(),
    )
    partition_sink = build_run_partition_sink(parsed, resources, processor="p", run_tag="t")
    assert partition_sink is not None and partition_sink.on_executors
    stores = open_stores(data_dir=tmp_path / "data")
    stats = LiveStats(input_from_progress=False)

    def writer() -> ProcessorWriter:
        sample = SampleBuffer(stores.documents, "p", capacity=10)
        return ProcessorWriter(
            generation=1, stats=stats, sample=sample, dlq=None, sink=partition_sink
        )

    checkpoint = tmp_path / "checkpoint"
    try:
        _run_recorded(spark, compiled, writer(), checkpoint)
        https = _https_stats(stats, pipeline)
        assert https["inputMessageCount"] == len(STATS_DOCS) == len(api.calls)
        assert https["outputMessageCount"] == api.sink_requests == len(api.sink)
        assert api.sink_requests == len(STATS_DOCS) - len(REFUSED)
        assert https["dlqMessageCount"] == len(REFUSED)
        assert https["latencyMs"]["samples"] == len(api.calls)
        assert 0 < https["latencyMs"]["p50"] <= https["latencyMs"]["p99"]
        first = (dict(https), list(api.calls))

        # A crash after the last batch's requests and before Spark committed it: without its
        # commit entry, the restarted query runs that batch again, with the same id.
        commits = checkpoint / "commits"
        last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
        last.unlink()
        (commits / f".{last.name}.crc").unlink(missing_ok=True)
        _run_recorded(spark, compiled, writer(), checkpoint)
        assert len(api.calls) > len(first[1])  # the API saw the batch's requests again
        assert len(api.sink) == len(STATS_DOCS) - len(REFUSED)  # deduplicated on the key
        again = _https_stats(stats, pipeline)
        # Counted once: the replay's counts replaced the first attempt's (its latencies too,
        # which differ from run to run; their number does not).
        latency, first_latency = again.pop("latencyMs"), first[0].pop("latencyMs")
        assert again == first[0]
        assert latency["samples"] == first_latency["samples"] == len(STATS_DOCS)
        assert latency["p50"] <= latency["p99"]
    finally:
        stores.close()
