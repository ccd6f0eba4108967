"""`trigger` and `accumulationMode` on the four closing window stages: parser tables (issue 25).

Every row names the exact `{code, path}` of each problem; paths are relative to the stage body.
"""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages._windowing.triggers import Firing, Trigger

GROUP = {"$group": {"_id": "$k", "n": {"$count": {}}}}
SECOND = {"size": 1, "unit": "second"}

BODIES: dict[str, dict[str, Any]] = {
    "$tumblingWindow": {"interval": {"size": 10, "unit": "second"}, "pipeline": [GROUP]},
    "$hoppingWindow": {
        "interval": {"size": 10, "unit": "second"},
        "hopSize": {"size": 5, "unit": "second"},
        "pipeline": [GROUP],
    },
    "$sessionWindow": {"partitionBy": "$k", "gap": SECOND, "pipeline": [GROUP]},
    "$slidingWindow": {"timeDifference": SECOND, "pipeline": [GROUP]},
}
KINDS = list(BODIES)

VALID: list[tuple[dict[str, Any], Trigger | None, str]] = [
    ({}, None, "accumulating"),
    ({"trigger": {}}, Trigger(), "accumulating"),
    ({"trigger": {"early": {"count": 100}}}, Trigger(early=Firing(count=100)), "accumulating"),
    ({"trigger": {"early": {"count": 2.0}}}, Trigger(early=Firing(count=2)), "accumulating"),
    (
        {"trigger": {"late": {"count": 1}}, "accumulationMode": "discarding"},
        Trigger(late=Firing(count=1)),
        "discarding",
    ),
    (
        {
            "trigger": {"early": {"every": {"size": 10, "unit": "second"}}, "late": {"count": 1}},
            "accumulationMode": "accumulatingAndRetracting",
        },
        Trigger.model_validate(
            {"early": {"every": {"size": 10, "unit": "second"}}, "late": {"count": 1}}
        ),
        "accumulatingAndRetracting",
    ),
    (
        {"trigger": {"early": {"count": 5}, "onlyUpdatedPanes": True}},
        Trigger(early=Firing(count=5), only_updated_panes=True),
        "accumulating",
    ),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("fields", "trigger", "mode"), VALID)
def test_valid(parse_body, kind: str, fields: dict[str, Any], trigger: Any, mode: str) -> None:
    spec = parse_body(kind, {**BODIES[kind], **fields})
    assert spec.trigger == trigger
    assert spec.accumulation == mode


INVALID: list[tuple[dict[str, Any], list[tuple[str, str]]]] = [
    ({"accumulationMode": "discarding"}, [("invalid_combination", "/accumulationMode")]),
    (
        {"trigger": None, "accumulationMode": "discarding"},
        [("invalid_combination", "/accumulationMode")],
    ),
    (
        {"trigger": {}, "accumulationMode": "retracting"},
        [("literal_error", "/accumulationMode")],
    ),
    ({"trigger": {"early": {"count": 0}}}, [("greater_than_equal", "/trigger/early/count")]),
    ({"trigger": {"late": {"count": -3}}}, [("greater_than_equal", "/trigger/late/count")]),
    ({"trigger": {"early": {"count": 1.5}}}, [("int_from_float", "/trigger/early/count")]),
    ({"trigger": {"early": {"count": True}}}, [("int_type", "/trigger/early/count")]),
    ({"trigger": {"early": {"count": "3"}}}, [("int_type", "/trigger/early/count")]),
    ({"trigger": {"early": {}}}, [("invalid_value", "/trigger/early")]),
    (
        {"trigger": {"early": {"count": 1, "every": SECOND}}},
        [("invalid_value", "/trigger/early")],
    ),
    (
        {"trigger": {"early": {"every": {"size": 0, "unit": "second"}}}},
        [("greater_than", "/trigger/early/every/size")],
    ),
    (
        {"trigger": {"late": {"every": {"size": 1, "unit": "week"}}}},
        [("literal_error", "/trigger/late/every/unit")],
    ),
    ({"trigger": {"early": {"every": {"size": 1}}}}, [("missing", "/trigger/early/every/unit")]),
    ({"trigger": {"early": {"count": 1, "n": 2}}}, [("extra_forbidden", "/trigger/early/n")]),
    ({"trigger": {"eager": {"count": 1}}}, [("extra_forbidden", "/trigger/eager")]),
    ({"trigger": {"onlyUpdatedPanes": 1}}, [("bool_type", "/trigger/onlyUpdatedPanes")]),
    ({"trigger": {"early": 5}}, [("model_type", "/trigger/early")]),
    ({"trigger": []}, [("model_type", "/trigger")]),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("fields", "expected"), INVALID)
def test_invalid(body_problems, kind: str, fields: dict[str, Any], expected: list[Any]) -> None:
    assert body_problems(kind, {**BODIES[kind], **fields}) == expected


@pytest.mark.parametrize("kind", ["$tumblingWindow", "$hoppingWindow", "$sessionWindow"])
def test_late_is_refused_on_processing_time_windows(body_problems, kind: str) -> None:
    body = {**BODIES[kind], "boundary": "processingTime", "trigger": {"late": {"count": 1}}}
    assert body_problems(kind, body) == [("invalid_combination", "/trigger/late")]


@pytest.mark.parametrize("kind", ["$tumblingWindow", "$hoppingWindow", "$sessionWindow"])
def test_early_is_allowed_on_processing_time_windows(parse_body, kind: str) -> None:
    body = {**BODIES[kind], "boundary": "processingTime", "trigger": {"early": {"count": 1}}}
    assert parse_body(kind, body).trigger == Trigger(early=Firing(count=1))


def test_problems_are_collected_with_field_errors(body_problems) -> None:
    body = {
        **BODIES["$tumblingWindow"],
        "interval": {"size": 0, "unit": "second"},
        "accumulationMode": "discarding",
    }
    assert body_problems("$tumblingWindow", body) == [
        ("invalid_combination", "/accumulationMode"),
        ("greater_than", "/interval/size"),
    ]


def test_messages_say_what_was_received(body_messages) -> None:
    body = {**BODIES["$tumblingWindow"], "trigger": {"early": {"count": 0}, "late": {}}}
    assert body_messages("$tumblingWindow", body) == [
        "count must be at least 1, got 0",
        "a firing needs exactly one of count or every, got neither",
    ]


def test_firing_helpers() -> None:
    trigger = Trigger.model_validate({"early": {"count": 3}, "late": {"every": SECOND}})
    assert [name for name, _ in trigger.firings()] == ["early", "late"]
    assert trigger.uses_clock
    assert trigger.late is not None and trigger.late.every_ms == 1_000
    assert not Trigger(early=Firing(count=1)).uses_clock


def test_specs_are_frozen(parse_body) -> None:
    spec = parse_body("$tumblingWindow", {**BODIES["$tumblingWindow"], "trigger": {}})
    with pytest.raises(ValueError):
        spec.trigger.only_updated_panes = True
