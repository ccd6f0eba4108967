"""`operator_names`: the operators a pipeline's verbose stats list, in pipeline order."""

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
def test_every_window_kind_lists_its_inner_operators_in_place(key: str) -> None:
    body = {**WINDOWS[key], "pipeline": [{"$match": {"k": {"$ne": None}}}, GROUP]}
    after = {"$project": {"n": 1}}
    operators = operator_names([SOURCE, {key: body}, after, EMIT])
    assert operators == [
        "SourceOperator",
        "MatchOperator",
        "GroupOperator",
        "ProjectOperator",
        "EmitOperator",
    ]


def test_a_pipeline_without_a_window_lists_its_stages() -> None:
    operators = operator_names([SOURCE, {"$match": {"k": 1}}, EMIT])
    assert operators == ["SourceOperator", "MatchOperator", "EmitOperator"]
