"""`$replaceRoot` spec: {newRoot}."""

from __future__ import annotations

import pytest

from pipeline_stages.replace_root import KEY, OPERATOR_NAME, ReplaceRootSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$replaceRoot", "ReplaceRootOperator")


@pytest.mark.parametrize("new_root", ["$fullDocument", {"$mergeObjects": ["$a", {"x": 1.0}]}])
def test_valid(parse_body, new_root) -> None:
    spec = parse_body(KEY, {"newRoot": new_root})
    assert isinstance(spec, ReplaceRootSpec)
    assert spec.new_root == new_root


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({}, [("missing", "/newRoot")]),
        ({"new_root": "$a"}, [("missing", "/newRoot"), ("extra_forbidden", "/new_root")]),
        ("$a", [("model_type", "")]),
    ],
)
def test_invalid(body_problems, body, expected) -> None:
    assert body_problems(KEY, body) == expected
