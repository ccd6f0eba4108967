"""`$hoppingWindow` spec: hopSize plus the shared window fields."""

from __future__ import annotations

import pytest

import pipeline_stages.hopping_window as module
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.stage_fields import FixedWindowTiming
from pipeline_stages.hopping_window import KEY, HoppingWindowSpec

GROUP = {"$group": {"_id": None, "n": {"$count": {}}}}


def window(**fields):
    return {
        "interval": {"size": 5, "unit": "second"},
        "hopSize": {"size": 2, "unit": "second"},
        "pipeline": [GROUP],
        **fields,
    }


def test_key_and_no_operator_name() -> None:
    assert KEY == "$hoppingWindow"
    assert not hasattr(module, "OPERATOR_NAME")


def test_defaults_and_geometry(parse_body) -> None:
    spec = parse_body(KEY, window())
    assert isinstance(spec, HoppingWindowSpec)
    assert spec.geometry() == FixedWindowTiming(WindowGeometry(5_000, 2_000, 0), 3_000, None)


@pytest.mark.parametrize("hop", [{"size": 10, "unit": "second"}, {"size": 500, "unit": "ms"}])
def test_hop_may_exceed_or_undercut_interval(parse_body, hop) -> None:
    spec = parse_body(KEY, window(hopSize=hop))
    assert spec.geometry().grid.hop_ms == spec.hop_size.ms


def test_offset_and_idle(parse_body) -> None:
    spec = parse_body(
        KEY,
        window(
            offset={"offsetFromUtc": -30, "unit": "minute"},
            idleTimeout={"size": 1, "unit": "minute"},
        ),
    )
    assert spec.geometry() == FixedWindowTiming(
        WindowGeometry(5_000, 2_000, -1_800_000), 3_000, 60_000
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"interval": {"size": 5, "unit": "second"}, "pipeline": [GROUP]},
            [("missing", "/hopSize")],
        ),
        (window(hopSize={"size": 0, "unit": "second"}), [("greater_than", "/hopSize/size")]),
        (window(hopSize=2), [("model_type", "/hopSize")]),
        (
            window(boundary="processingTime", idleTimeout=0),
            [("invalid_combination", "/idleTimeout")],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_hop_size_message(body_messages) -> None:
    assert body_messages(KEY, window(hopSize={"size": 0, "unit": "second"})) == [
        "Duration size must be greater than 0. Got 0."
    ]
