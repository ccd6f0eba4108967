"""`$setStreamMeta` spec: `stream.<field>` keys."""

from __future__ import annotations

import pytest

from pipeline_stages.set_stream_meta import KEY, OPERATOR_NAME, SetStreamMetaSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$setStreamMeta", "SetStreamMetaOperator")


def test_valid(parse_body) -> None:
    body = {"stream.target": {"$concat": ["c_", "$region"]}, "stream.x.y": 1}
    spec = parse_body(KEY, body)
    assert isinstance(spec, SetStreamMetaSpec)
    assert spec.fields == body
    assert list(spec.fields) == ["stream.target", "stream.x.y"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("too_short", "")]),
        ("stream.a", [("dict_type", "")]),
        ({"target": 1}, [("invalid_value", "/target")]),
        ({"stream.": 1}, [("invalid_value", "/stream.")]),
        ({"stream.window.start": 1}, [("invalid_value", "/stream.window.start")]),
        (
            {"stream.source": 1, "stream.ok": 2, "meta.x": 3},
            [("invalid_value", "/stream.source"), ("invalid_value", "/meta.x")],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected


def test_message(body_messages) -> None:
    assert body_messages(KEY, {"target": 1}) == [
        "$setStreamMeta keys must start with 'stream.', got \"target\""
    ]
