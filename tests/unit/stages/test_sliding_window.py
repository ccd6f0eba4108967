"""`$slidingWindow` (Sluice extension) spec: timeDifference, grace, pipeline."""

from __future__ import annotations

import pytest

import pipeline_stages.sliding_window as module
from pipeline_stages.sliding_window import KEY, SlidingGeometry, SlidingWindowSpec

GROUP = {"$group": {"_id": None, "n": {"$count": {}}}}


def window(**fields):
    return {"timeDifference": {"size": 10, "unit": "second"}, "pipeline": [GROUP], **fields}


def test_key_and_no_operator_name() -> None:
    assert KEY == "$slidingWindow"
    assert not hasattr(module, "OPERATOR_NAME")
    assert "extension" in (module.__doc__ or "")


def test_defaults_and_geometry(parse_body) -> None:
    spec = parse_body(KEY, window())
    assert isinstance(spec, SlidingWindowSpec)
    assert spec.geometry() == SlidingGeometry(10_000, 3_000, None)


def test_grace_and_idle(parse_body) -> None:
    spec = parse_body(KEY, window(grace=0, idleTimeout={"size": 1, "unit": "minute"}))
    assert spec.geometry() == SlidingGeometry(10_000, 0, 60_000)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"pipeline": [GROUP]}, [("missing", "/timeDifference")]),
        (
            window(timeDifference={"size": 0, "unit": "ms"}),
            [("greater_than", "/timeDifference/size")],
        ),
        (window(grace=2), [("invalid_value", "/grace")]),
        (window(grace={"size": 2, "unit": "hour"}), [("less_than_equal", "/grace")]),
        (window(boundary="eventTime"), [("extra_forbidden", "/boundary")]),
        (window(allowedLateness=0), [("extra_forbidden", "/allowedLateness")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
