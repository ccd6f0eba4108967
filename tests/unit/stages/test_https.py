"""`$https` spec: Atlas's fields, the payload pipeline and config."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages.https import KEY, OPERATOR_NAME, HttpsSpec


def body(**fields: Any) -> dict[str, Any]:
    return {"connectionName": "api", **fields}


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$https", "HttpsOperator")


def test_defaults(parse_body) -> None:
    spec = parse_body(KEY, body())
    assert isinstance(spec, HttpsSpec)
    assert (spec.method, spec.on_error, spec.as_, spec.path, spec.payload) == (
        "GET",
        "dlq",
        None,
        None,
        None,
    )
    config = spec.config
    assert (config.connection_timeout_sec, config.request_timeout_sec) == (10, 30)
    assert (config.parse_json_strings, config.max_retries, config.retry_backoff_ms) == (
        False,
        3,
        200,
    )


def test_every_field(parse_body) -> None:
    spec = parse_body(
        KEY,
        body(
            path={"$concat": ["/users/", "$user"]},
            parameters={"q": "$name", "n": 3},
            method="post",
            headers={"X-Trace": "$trace"},
            onError="Ignore",
            payload=[{"$project": {"name": 1}}, {"$addFields": {"v": 2}}],
            config={"connectionTimeoutSec": 2, "requestTimeoutSec": 5, "parseJsonStrings": True},
            **{"as": "response.body"},
        ),
    )
    assert (spec.method, spec.on_error, spec.as_) == ("POST", "ignore", "response.body")
    assert spec.payload is not None and len(spec.payload) == 2
    assert (spec.config.request_timeout_sec, spec.config.parse_json_strings) == (5, True)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"connectionName": ...}, [("missing", "/connectionName")]),
        ({"connectionName": ""}, [("string_too_short", "/connectionName")]),
        ({"path": 5}, [("invalid_value", "/path")]),
        ({"path": {}}, [("invalid_value", "/path")]),
        ({"method": "HEAD"}, [("literal_error", "/method")]),
        ({"onError": "retry"}, [("literal_error", "/onError")]),
        ({"as": "$r"}, [("invalid_value", "/as")]),
        ({"as": "a..b"}, [("invalid_value", "/as")]),
        ({"headers": ["a"]}, [("dict_type", "/headers")]),
        ({"parameters": "a=b"}, [("dict_type", "/parameters")]),
        ({"payload": {"$project": {}}}, [("tuple_type", "/payload")]),
        (
            {"payload": [{"$group": {"_id": None}}]},
            [("unsupported_option", "/payload/0/$group")],
        ),
        (
            {"payload": [{"$nope": {}}]},
            [("unsupported_option", "/payload/0/$nope"), ("unknown_stage", "/payload/0")],
        ),
        ({"payload": [{"$project": {"$a": 1}}]}, [("invalid_value", "/payload/0/$project/$a")]),
        ({"config": {"requestTimeoutSec": 0}}, [("greater_than", "/config/requestTimeoutSec")]),
        (
            {"config": {"connectionTimeoutSec": "5"}},
            [("int_type", "/config/connectionTimeoutSec")],
        ),
        ({"config": {"parseJsonStrings": "yes"}}, [("bool_type", "/config/parseJsonStrings")]),
        ({"config": {"maxRetries": 11}}, [("less_than_equal", "/config/maxRetries")]),
        ({"config": {"retryBackoffMs": -1}}, [("greater_than_equal", "/config/retryBackoffMs")]),
        ({"config": {"tls": True}}, [("extra_forbidden", "/config/tls")]),
        ({"url": "http://x"}, [("extra_forbidden", "/url")]),
    ],
)
def test_invalid(body_problems, fields, expected) -> None:
    raw = {k: v for k, v in body(**fields).items() if v is not ...}
    assert body_problems(KEY, raw) == expected
