"""`$https` as the last stage: the writer against a real API on 127.0.0.1, and end to end."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline_stages import parse_stage
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sinks.dispatch import build_sink_writer
from pipeline_stages._connectors.sinks.https_writer import (
    HttpsSinkFailed,
    HttpsSinkPlan,
    HttpsSinkWriter,
    plan_https,
)
from pipeline_stages._stream.batch import BatchResult, Output
from pipeline_stages._stream.context import ConnectionInfo
from service.runtime.process import run_process
from tests.integration.http_api import HttpApi, running_api


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
