"""`$throttle` spec: messagesPerSec / bytesPerSec, at least one."""

from __future__ import annotations

import pytest

from pipeline_stages.throttle import KEY, OPERATOR_NAME, ThrottleSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$throttle", "ThrottleOperator")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"messagesPerSec": 100}, (100, None)),
        ({"bytesPerSec": 4096.0}, (None, 4096)),
        ({"messagesPerSec": 1, "bytesPerSec": 2}, (1, 2)),
    ],
)
def test_valid(parse_body, body, expected) -> None:
    spec = parse_body(KEY, body)
    assert isinstance(spec, ThrottleSpec)
    assert (spec.messages_per_sec, spec.bytes_per_sec) == expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("invalid_combination", "")]),
        ({"messagesPerSec": None}, [("invalid_combination", "")]),
        ({"messagesPerSec": 0}, [("greater_than", "/messagesPerSec")]),
        ({"bytesPerSec": -5}, [("greater_than", "/bytesPerSec")]),
        ({"messagesPerSec": 1.5}, [("int_from_float", "/messagesPerSec")]),
        ({"messagesPerSec": True}, [("int_type", "/messagesPerSec")]),
        ({"messagesPerSec": 1, "burst": 2}, [("extra_forbidden", "/burst")]),
        ("fast", [("model_type", "")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_message_is_atlas_text(body_messages) -> None:
    assert body_messages(KEY, {}) == [
        "$throttle requires at least one of 'bytesPerSec' or 'messagesPerSec'"
    ]
