"""`$match` spec: a raw query filter."""

from __future__ import annotations

import pytest

from pipeline_stages.match import KEY, OPERATOR_NAME, MatchSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$match", "MatchOperator")


def test_filter_kept_raw_in_order(parse_body) -> None:
    body = {"z": {"$gt": 1}, "a": 2.0, "$or": [{"b": 1}, {"c": {"$in": [1, 2.5]}}]}
    spec = parse_body(KEY, body)
    assert isinstance(spec, MatchSpec)
    assert spec.filter == body
    assert list(spec.filter) == ["z", "a", "$or"]
    assert type(spec.filter["a"]) is float
    assert type(spec.filter["z"]["$gt"]) is int


def test_a_field_named_filter_is_a_filter(parse_body) -> None:
    # The spec attribute is `filter`; a user field of that name must not be confused with it.
    spec = parse_body(KEY, {"filter": {"x": 1}})
    assert spec.filter == {"filter": {"x": 1}}


def test_empty_filter_matches_everything(parse_body) -> None:
    assert parse_body(KEY, {}).filter == {}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ([{"a": 1}], [("dict_type", "")]),
        ("a", [("dict_type", "")]),
        ({"$where": "this.a > 1"}, [("unsupported_option", "/$where")]),
        ({"loc": {"$near": [0, 0]}}, [("unsupported_option", "/loc/$near")]),
        ({"$text": {"$search": "x"}}, [("unsupported_option", "/$text")]),
        (
            {"$and": [{"a": 1}, {"b": {"$nearSphere": [0, 0]}}]},
            [("unsupported_option", "/$and/1/b/$nearSphere")],
        ),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
