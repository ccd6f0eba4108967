"""`operator_names`: which operator of a window pipeline gets the window's output count."""

from __future__ import annotations

from typing import Any

import pytest

from service.manager.view import operator_names

SOURCE = {"$source": {"connectionName": "in", "timeField": "$t"}}
GROUP = {"$group": {"_id": "$k", "n": {"$sum": 1}}}
EMIT = {"$emit": {"connectionName": "out", "topic": "t"}}
SECOND = {"size": 1, "unit": "second"}
WINDOWS: dict[str, dict[str, Any]] = {
    "$tumblingWindow": {"interval": SECOND},
    "$hoppingWindow": {"interval": SECOND, "hopSize": SECOND},
    "$sessionWindow": {"gap": SECOND, "partitionBy": "$k"},
    "$slidingWindow": {"timeDifference": SECOND, "partitionBy": "$k"},
}


@pytest.mark.parametrize("key", sorted(WINDOWS))
def test_every_window_kind_names_its_first_inner_operator(key: str) -> None:
    body = {**WINDOWS[key], "pipeline": [{"$match": {"k": {"$ne": None}}}, GROUP]}
    operators, window_operator = operator_names([SOURCE, {key: body}, EMIT])
    assert operators == ["SourceOperator", "MatchOperator", "GroupOperator", "EmitOperator"]
    assert window_operator == "MatchOperator"


def test_a_pipeline_without_a_window_has_no_window_operator() -> None:
    operators, window_operator = operator_names([SOURCE, {"$match": {"k": 1}}, EMIT])
    assert (operators, window_operator) == (
        ["SourceOperator", "MatchOperator", "EmitOperator"],
        None,
    )
