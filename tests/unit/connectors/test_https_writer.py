"""The `$https` sink plan: connection checks, refused options, names computed upstream."""

from __future__ import annotations

import pytest

from pipeline_stages import parse_stage
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sinks.https_writer import plan_https
from pipeline_stages._connectors.sinks.plans import computed_names
from pipeline_stages._stream.context import ConnectionInfo

CONNECTIONS = {
    "api": ConnectionInfo("api", "Https", {"url": "http://127.0.0.1:1"}),
    "kafka": ConnectionInfo("kafka", "Kafka", {}),
}


def plan(body: dict[str, object]) -> tuple[object, list[tuple[str, str]]]:
    spec = parse_stage({"$https": body}).spec
    problems = ProblemCollector()
    made = plan_https(spec, connection_of=CONNECTIONS.get, path="/pipeline/3", problems=problems)
    return made, [(p.code, p.path) for p in problems.problems]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"connectionName": "nope"}, [("unknown_connection", "/pipeline/3/$https/connectionName")]),
        ({"connectionName": "kafka"}, [("invalid_value", "/pipeline/3/$https/connectionName")]),
        (
            {"connectionName": "api", "payload": [{"$project": {"a": 1}}]},
            [("unsupported_option", "/pipeline/3/$https/payload")],
        ),
    ],
)
def test_problems(body, expected) -> None:
    made, problems = plan(body)
    assert made is None
    assert problems == expected


def test_literal_and_computed_names() -> None:
    made, problems = plan(
        {
            "connectionName": "api",
            "path": {"$concat": ["/orders/", "$id"]},
            "parameters": {"v": 2, "debug": True, "who": "$user"},
            "headers": {"X-Static": "s", "X-Trace": "$trace"},
            "method": "PUT",
            "onError": "IGNORE",
        }
    )
    assert problems == []
    assert sorted(computed_names(made)) == ["headers.X-Trace", "parameters.who", "path"]
    assert made.parameters["v"].literal == "2"
    assert made.parameters["debug"].literal == "true"
    assert (made.method, made.on_error) == ("PUT", "ignore")
