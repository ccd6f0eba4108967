"""`$tumblingWindow` spec: interval, lateness, idle timeout, boundary, geometry."""

from __future__ import annotations

import pytest

import pipeline_stages.tumbling_window as module
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.stage_fields import FixedWindowTiming
from pipeline_stages.hopping_window import HoppingWindowSpec
from pipeline_stages.match import MatchSpec
from pipeline_stages.tumbling_window import KEY, TumblingWindowSpec

GROUP = {"$group": {"_id": None, "n": {"$count": {}}}}
SECOND = {"size": 1, "unit": "second"}


def window(**fields):
    return {"interval": {"size": 10, "unit": "second"}, "pipeline": [GROUP], **fields}


def test_key_and_no_operator_name() -> None:
    assert KEY == "$tumblingWindow"
    assert not hasattr(module, "OPERATOR_NAME")


def test_defaults(parse_body) -> None:
    spec = parse_body(KEY, window())
    assert isinstance(spec, TumblingWindowSpec)
    assert spec.boundary == "eventTime"
    assert (spec.allowed_lateness.size, spec.allowed_lateness.unit) == (3, "second")
    assert spec.idle_timeout is None
    assert spec.offset is None
    assert spec.geometry() == FixedWindowTiming(WindowGeometry(10_000, 10_000, 0), 3_000, None)


def test_aliases_and_geometry(parse_body) -> None:
    spec = parse_body(
        KEY,
        window(
            interval={"size": 1.0, "unit": "hour"},
            offset={"offsetFromUtc": 8, "unit": "hour"},
            allowedLateness={"size": 30, "unit": "minute"},
            idleTimeout={"size": 2, "unit": "minute"},
        ),
    )
    assert spec.geometry() == FixedWindowTiming(
        WindowGeometry(3_600_000, 3_600_000, 28_800_000), 1_800_000, 120_000
    )


def test_zero_forms(parse_body) -> None:
    spec = parse_body(KEY, window(allowedLateness=0, idleTimeout=0))
    assert (spec.allowed_lateness, spec.idle_timeout) == (0, 0)
    assert spec.geometry() == FixedWindowTiming(WindowGeometry(10_000, 10_000, 0), 0, 0)
    assert parse_body(KEY, window(allowedLateness=0.0)).allowed_lateness == 0


def test_processing_time_has_no_lateness(parse_body) -> None:
    spec = parse_body(KEY, window(boundary="processingTime"))
    assert spec.geometry().allowed_lateness_ms == 0


def test_inner_pipeline_holds_specs(parse_body) -> None:
    spec = parse_body(KEY, window(pipeline=[{"$match": {"a": 1}}, GROUP]))
    assert isinstance(spec.pipeline[0], MatchSpec)
    assert len(spec.pipeline) == 2


def test_as_hopping(parse_body) -> None:
    spec = parse_body(KEY, window(allowedLateness=0))
    hopping = spec.as_hopping()
    assert isinstance(hopping, HoppingWindowSpec)
    assert hopping.hop_size == spec.interval
    assert hopping.pipeline == spec.pipeline
    assert "allowed_lateness" in hopping.model_fields_set
    assert hopping.geometry() == spec.geometry()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"pipeline": [GROUP]}, [("missing", "/interval")]),
        (window(interval={"size": 0, "unit": "second"}), [("greater_than", "/interval/size")]),
        (window(interval={"size": -1, "unit": "second"}), [("greater_than", "/interval/size")]),
        (window(interval={"size": 1.5, "unit": "second"}), [("value_error", "/interval/size")]),
        (window(interval={"size": 1, "unit": "week"}), [("literal_error", "/interval/unit")]),
        (
            window(interval={"size": 1, "unit": "second", "x": 1}),
            [("extra_forbidden", "/interval/x")],
        ),
        (window(pipeline=[]), [("too_short", "/pipeline")]),
        ({"interval": SECOND}, [("missing", "/pipeline")]),
        (window(allowedLateness=5), [("invalid_value", "/allowedLateness")]),
        (window(allowedLateness=True), [("model_type", "/allowedLateness")]),
        (
            window(allowedLateness={"size": 31, "unit": "minute"}),
            [("less_than_equal", "/allowedLateness")],
        ),
        (
            window(allowedLateness={"size": 1, "unit": "day"}),
            [("less_than_equal", "/allowedLateness")],
        ),
        (window(allowedLateness={"size": 1}), [("missing", "/allowedLateness/unit")]),
        (window(idleTimeout=10), [("invalid_value", "/idleTimeout")]),
        (window(boundary="wallClock"), [("literal_error", "/boundary")]),
        (window(offset={"offsetFromUtc": 1, "unit": "day"}), [("literal_error", "/offset/unit")]),
        (window(hopSize=SECOND), [("extra_forbidden", "/hopSize")]),
        (window(allowed_lateness=0), [("extra_forbidden", "/allowed_lateness")]),
        (
            window(boundary="processingTime", allowedLateness=0),
            [("invalid_combination", "/allowedLateness")],
        ),
        (
            window(boundary="processingTime", idleTimeout=SECOND),
            [("invalid_combination", "/idleTimeout")],
        ),
        (
            window(
                boundary="processingTime",
                allowedLateness=SECOND,
                interval={"size": 0, "unit": "ms"},
            ),
            [("invalid_combination", "/allowedLateness"), ("greater_than", "/interval/size")],
        ),
        (
            window(pipeline=[{"$match": 5}, {"$sort": {}}]),
            [("dict_type", "/pipeline/0/$match"), ("too_short", "/pipeline/1/$sort")],
        ),
        (window(pipeline=[{"$nope": {}}]), [("unknown_stage", "/pipeline/0")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"interval": {"size": 0, "unit": "second"}},
            "Window interval size must be greater than 0. Got 0.",
        ),
        (
            {"allowedLateness": 5},
            "Must specify unit and size for non-zero allowedLateness values, got 5",
        ),
        (
            {"allowedLateness": {"size": 45, "unit": "minute"}},
            "Maximum allowedLateness is 30 minutes, got 45 minute",
        ),
        ({"interval": {"size": 1.5, "unit": "second"}}, "size must be a whole number, got 1.5"),
    ],
)
def test_atlas_messages(body_messages, fields, message) -> None:
    assert body_messages(KEY, window(**fields)) == [message]
