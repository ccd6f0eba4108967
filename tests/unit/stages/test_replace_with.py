"""`$replaceWith` spec: the raw newRoot expression."""

from __future__ import annotations

import pytest

from pipeline_stages.replace_with import KEY, OPERATOR_NAME, ReplaceWithSpec


def test_key_and_operator() -> None:
    assert (KEY, OPERATOR_NAME) == ("$replaceWith", "ReplaceRootOperator")


@pytest.mark.parametrize(
    "body", ["$doc", {"$mergeObjects": ["$a", "$b"]}, {"a": "$x", "b": 2.5}, {"new_root": 1}]
)
def test_any_expression_is_kept_raw(parse_body, body) -> None:
    spec = parse_body(KEY, body)
    assert isinstance(spec, ReplaceWithSpec)
    assert spec.new_root == body
