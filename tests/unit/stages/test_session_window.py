"""`$sessionWindow` spec: partitionBy and gap."""

from __future__ import annotations

import pytest

import pipeline_stages.session_window as module
from pipeline_stages.session_window import KEY, SessionGeometry, SessionWindowSpec

GROUP = {"$group": {"_id": None, "n": {"$count": {}}}}


def window(**fields):
    return {
        "partitionBy": "$userId",
        "gap": {"size": 5, "unit": "minute"},
        "pipeline": [GROUP],
        **fields,
    }


def test_key_and_no_operator_name() -> None:
    assert KEY == "$sessionWindow"
    assert not hasattr(module, "OPERATOR_NAME")


def test_defaults_and_geometry(parse_body) -> None:
    spec = parse_body(KEY, window())
    assert isinstance(spec, SessionWindowSpec)
    assert (spec.partition_by, spec.boundary) == ("$userId", "eventTime")
    assert spec.geometry() == SessionGeometry(
        gap_ms=300_000, allowed_lateness_ms=3_000, idle_timeout_ms=None
    )


@pytest.mark.parametrize("partition_by", ["$a.b", {"$toLower": "$user"}, 1])
def test_simple_partition_expressions(parse_body, partition_by) -> None:
    assert parse_body(KEY, window(partitionBy=partition_by)).partition_by == partition_by


def test_stages_around_the_group_are_accepted(parse_body) -> None:
    stages = [{"$match": {"a": 1}}, GROUP, {"$project": {"n": 1}}]
    assert len(parse_body(KEY, window(pipeline=stages)).pipeline) == 3


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"gap": {"size": 5, "unit": "minute"}, "pipeline": [GROUP]},
            [("missing", "/partitionBy")],
        ),
        (window(partitionBy={"a": "$a", "b": "$b"}), [("invalid_value", "/partitionBy")]),
        (window(partitionBy={"a": "$a"}), [("invalid_value", "/partitionBy")]),
        (window(gap={"size": 0, "unit": "minute"}), [("greater_than", "/gap/size")]),
        (window(offset={"offsetFromUtc": 1, "unit": "hour"}), [("extra_forbidden", "/offset")]),
        (window(allowedLateness=3), [("invalid_value", "/allowedLateness")]),
        # Atlas refuses a session window without a $group, even with another blocking stage.
        (window(pipeline=[{"$match": {"a": 1}}]), [("invalid_value", "/pipeline")]),
        (window(pipeline=[{"$sort": {"a": 1}}, {"$limit": 2}]), [("invalid_value", "/pipeline")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
