"""`$globalWindow` spec (issue 25): required early trigger, no late firings, bounded state."""

from __future__ import annotations

from typing import Any

import pytest

import pipeline_stages.global_window as module
from pipeline_stages import parse_pipeline
from pipeline_stages._windowing.triggers import Firing, Trigger
from pipeline_stages.global_window import KEY, GlobalWindowSpec

GROUP = {"$group": {"_id": "$k", "n": {"$count": {}}}}
EARLY = {"early": {"count": 10}}


def window(**fields: Any) -> dict[str, Any]:
    return {"trigger": EARLY, "pipeline": [GROUP], **fields}


def test_key_and_no_operator_name() -> None:
    assert KEY == "$globalWindow"
    assert not hasattr(module, "OPERATOR_NAME")


def test_defaults(parse_body) -> None:
    spec = parse_body(KEY, window())
    assert isinstance(spec, GlobalWindowSpec)
    assert spec.trigger == Trigger(early=Firing(count=10))
    assert spec.accumulation == "accumulating"
    assert spec.allow_unbounded_state is False
    # One window placed by event time that never closes: nothing is late, nothing idles.
    assert spec.event_time is True
    assert spec.allowed_lateness_ms() == 0 and spec.idle_timeout_ms() is None
    assert spec.warnings(has_dlq=False) == []


VALID = [
    window(trigger={"early": {"every": {"size": 10, "unit": "second"}}}),
    window(accumulationMode="accumulatingAndRetracting"),
    window(trigger={"early": {"count": 1}, "onlyUpdatedPanes": True}),
    window(pipeline=[{"$match": {"a": 1}}, GROUP, {"$sort": {"n": -1}}, {"$limit": 3}]),
    window(pipeline=[{"$count": "n"}]),
    window(
        pipeline=[
            {
                "$group": {
                    "_id": "$k",
                    "last": {"$last": "$v"},
                    "top": {"$topN": {"n": 3, "sortBy": {"v": 1}, "output": "$v"}},
                }
            }
        ]
    ),  # fmt: skip
    window(pipeline=[{"$group": {"_id": "$k", "all": {"$push": "$v"}}}], allowUnboundedState=True),
    window(
        pipeline=[{"$group": {"_id": "$k", "all": {"$push": "$v"}}}], accumulationMode="discarding"
    ),  # fmt: skip
    window(pipeline=[{"$sort": {"v": 1}}], allowUnboundedState=True),
]


@pytest.mark.parametrize("body", VALID)
def test_valid(parse_body, body: dict[str, Any]) -> None:
    assert isinstance(parse_body(KEY, body), GlobalWindowSpec)


INVALID = [
    ({"pipeline": [GROUP]}, [("missing", "/trigger")]),
    ({"trigger": None, "pipeline": [GROUP]}, [("model_type", "/trigger")]),
    (window(trigger={}), [("missing", "/trigger/early")]),
    (window(trigger={"onlyUpdatedPanes": True}), [("missing", "/trigger/early")]),
    (
        window(trigger={"early": {"count": 1}, "late": {"count": 1}}),
        [("invalid_combination", "/trigger/late")],
    ),
    (window(trigger={"early": {"count": 0}}), [("greater_than_equal", "/trigger/early/count")]),
    (window(accumulationMode="all"), [("literal_error", "/accumulationMode")]),
    (window(idleTimeout={"size": 1, "unit": "second"}), [("extra_forbidden", "/idleTimeout")]),
    (window(interval={"size": 1, "unit": "second"}), [("extra_forbidden", "/interval")]),
    (window(allowedLateness=0), [("extra_forbidden", "/allowedLateness")]),
    (window(allowUnboundedState="yes"), [("bool_type", "/allowUnboundedState")]),
    (window(pipeline=[]), [("too_short", "/pipeline")]),
    (
        window(
            pipeline=[{"$group": {"_id": "$k", "all": {"$push": "$v"}, "s": {"$addToSet": "$v"}}}]
        ),  # fmt: skip
        [
            ("invalid_combination", "/pipeline/0/$group/all/$push"),
            ("invalid_combination", "/pipeline/0/$group/s/$addToSet"),
        ],
    ),
    (window(pipeline=[{"$sort": {"v": 1}}, GROUP]), [("invalid_combination", "/pipeline/0")]),
    (window(pipeline=[{"$match": {"a": 1}}]), [("invalid_combination", "/pipeline")]),
    (
        window(pipeline=[{"$push": 1}], allowUnboundedState=True),
        [("unknown_stage", "/pipeline/0")],
    ),
]


@pytest.mark.parametrize(("body", "expected"), INVALID)
def test_invalid(body_problems, body: dict[str, Any], expected: list[Any]) -> None:
    assert body_problems(KEY, body) == expected


def test_unbounded_message_names_the_opt_in(body_messages) -> None:
    body = window(pipeline=[{"$group": {"_id": "$k", "all": {"$push": "$v"}}}])
    assert body_messages(KEY, body) == [
        "$push keeps every document of its group and the window never closes, so its state "
        "would grow without bound; set allowUnboundedState: true to accept that, or use "
        'accumulationMode "discarding"'
    ]


def test_in_a_pipeline_it_is_the_window() -> None:
    parsed = parse_pipeline(
        [
            {"$source": {"connectionName": "c", "topic": "t"}},
            {KEY: window()},
            {"$emit": {"connectionName": "c", "topic": "o"}},
        ]  # fmt: skip
    )
    assert parsed.window is not None and parsed.window.key == KEY
    assert [s.key for s in parsed.window_stages] == ["$group"]


def test_inner_expressions_are_scanned() -> None:
    with pytest.raises(Exception) as info:
        parse_pipeline(
            [
                {"$source": {"connectionName": "c", "topic": "t"}},
                {KEY: window(pipeline=[{"$group": {"_id": {"$nope": 1}, "n": {"$count": {}}}}])},
            ]  # fmt: skip
        )
    problems = [(p.code, p.path) for p in info.value.problems]  # type: ignore[attr-defined]
    assert ("unknown_operator", "/pipeline/1/$globalWindow/pipeline/0/$group/_id/$nope") in problems
