"""`$https` in the middle of a pipeline, on real Spark, against a real HTTP API on 127.0.0.1."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline_stages._stream.context import ConnectionInfo
from service.runtime.process import run_process
from tests.integration.http_api import HttpApi, running_api

pytestmark = pytest.mark.spark

DLQ = "_dlqMessage"


@pytest.fixture(scope="module")
def api() -> Iterator[HttpApi]:
    with running_api() as running:
        yield running


def run(
    spark: Any, api: HttpApi, stages: list[dict[str, Any]], docs: list[dict[str, Any]]
) -> tuple[int, list[Any], str]:
    out, err = io.StringIO(), io.StringIO()
    connection = ConnectionInfo("api", "Https", {"url": api.url, "headers": {"X-Key": "secret"}})
    code = run_process(
        # A stage after `$https` keeps it in the middle (the last `$https` is the sink).
        [{"$source": {"documents": docs}}, *stages, {"$match": {}}],
        out=out,
        err=err,
        batch_size=4,
        max_seconds=120,
        spark_factory=lambda: spark,
        connections={"api": connection},
    )
    return code, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def https(**fields: Any) -> dict[str, Any]:
    return {"$https": {"connectionName": "api", **fields}}


def outputs(lines: list[Any]) -> dict[Any, Any]:
    return {d["n"]: d for d in lines if DLQ not in d}


def dlq(lines: list[Any]) -> list[Any]:
    return [d[DLQ] for d in lines if DLQ in d]


def test_success_with_path_expression_and_json_strings(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [
            https(
                path={"$concat": ["/users/", {"$toString": "$n"}]},
                config={"parseJsonStrings": True},
                **{"as": "user"},
            )
        ],
        [{"n": i} for i in range(6)],
    )
    assert code == 0, err
    out = outputs(lines)
    assert sorted(out) == list(range(6))
    assert out[3]["user"] == {"id": "3", "name": "user-3", "tags": ["a", "b"]}
    assert dlq(lines) == []


def test_post_payload_parameters_and_headers(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [
            https(
                path="echo",
                method="POST",
                parameters={"q": "$name", "n": "$n", "flag": True},
                headers={"X-Trace": {"$concat": ["t-", "$name"]}},
                payload=[{"$project": {"_id": 0, "name": 1}}, {"$addFields": {"v": 2}}],
                **{"as": "echo"},
            )
        ],
        [{"n": 1, "name": "ann", "secret": "not sent"}],
    )
    assert code == 0, err
    echo = outputs(lines)[1]["echo"]
    assert echo["method"] == "POST"
    assert echo["query"] == {"q": "ann", "n": "1", "flag": "true"}
    assert (echo["x_key"], echo["x_trace"]) == ("secret", "t-ann")
    assert json.loads(echo["body"]) == {"name": "ann", "v": 2}
    # the document itself is not reshaped by the payload pipeline
    assert outputs(lines)[1]["secret"] == "not sent"


def test_4xx_goes_to_the_dlq_with_status_and_truncated_body(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [https(path="$p", **{"as": "r"})],
        [{"n": 1, "p": "/status/404"}, {"n": 2, "p": "/users/2"}],
    )
    assert code == 0, err
    assert list(outputs(lines)) == [2]
    (record,) = dlq(lines)
    assert record["operatorName"] == "HttpsOperator"
    reason = record["errInfo"]["reason"]
    assert reason.startswith(
        "Failed to process input document in HttpsOperator with error: request failed with "
        "status 404 after 1 attempt(s); response body: boom boom"
    )
    assert len(reason) < 1300  # the 2,000-character body is cut
    assert record["doc"]["n"] == 1


def test_5xx_is_retried_then_succeeds(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [
            https(
                path={"$concat": ["/flaky/", "$key"]}, config={"retryBackoffMs": 10}, **{"as": "r"}
            )
        ],
        [{"n": 1, "key": "k1"}, {"n": 2, "key": "k2"}],
    )
    assert code == 0, err
    out = outputs(lines)
    assert (out[1]["r"]["attempt"], out[2]["r"]["attempt"]) == (3, 3)
    assert api.flaky["k1"] == 3


def test_5xx_after_retries_goes_to_the_dlq(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [https(path="/status/503", config={"maxRetries": 2, "retryBackoffMs": 5}, **{"as": "r"})],
        [{"n": 1}],
    )
    assert code == 0, err
    (record,) = dlq(lines)
    assert "status 503 after 3 attempt(s)" in record["errInfo"]["reason"]


def test_timeout_and_slow_responses(spark: Any, api: HttpApi) -> None:
    config = {"requestTimeoutSec": 1, "maxRetries": 0}
    code, lines, err = run(
        spark,
        api,
        [https(path={"$concat": ["/slow/", "$ms"]}, config=config, **{"as": "r"})],
        [{"n": 1, "ms": "2500"}, {"n": 2, "ms": "300"}],
    )
    assert code == 0, err
    assert outputs(lines)[2]["r"] == {"slept": 300}
    (record,) = dlq(lines)
    assert record["doc"]["n"] == 1
    assert "timeout" in record["errInfo"]["reason"]


def test_invalid_json_goes_to_the_dlq(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(spark, api, [https(path="/text", **{"as": "r"})], [{"n": 1}])
    assert code == 0, err
    (record,) = dlq(lines)
    assert "not valid JSON" in record["errInfo"]["reason"]
    assert "hello, not json" in record["errInfo"]["reason"]


def test_on_error_ignore_keeps_the_document(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [https(path="/status/500", onError="ignore", config={"maxRetries": 0}, **{"as": "r"})],
        [{"n": 1}],
    )
    assert code == 0, err
    assert dlq(lines) == []
    assert "r" not in outputs(lines)[1]


def test_on_error_fail_fails_the_query(spark: Any, api: HttpApi) -> None:
    code, lines, err = run(
        spark,
        api,
        [https(path="/status/400", onError="fail", **{"as": "r"})],
        [{"n": 1}],
    )
    assert code != 0
    assert "request failed with status 400" in err


def test_connection_must_be_https(spark: Any, api: HttpApi) -> None:
    code, _, err = run(spark, api, [{"$https": {"connectionName": "local"}}], [{"n": 1}])
    assert code != 0
    problems = json.loads(err)["problems"]
    assert [(p["code"], p["path"]) for p in problems] == [
        ("invalid_value", "/pipeline/1/$https/connectionName")
    ]
