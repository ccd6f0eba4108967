"""The verbose stats' `operatorStats`: one entry per operator of the pipeline, from the stats
ledger's counters (which operators get which counts: `service.manager.stats`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline_stages._enrichment.operator_stats import public_stats
from pipeline_stages.throttle import OPERATOR_NAME as THROTTLE_OPERATOR
from service.stores.stats_ledger import OPERATOR_DLQ, OPERATOR_STATS, THROTTLE_COUNTERS


def operator_entries(
    current: Mapping[str, Any], operators: list[str], scale: int
) -> list[dict[str, Any]]:
    """`operatorStats` entries for `operators` (in pipeline order) and any other operator
    that has counts; sizes divided by `scale` (the API's `scale` parameter)."""
    operator_dlq = current[OPERATOR_DLQ]
    names = list(dict.fromkeys([*operators, *operator_dlq, *current[OPERATOR_STATS]]))
    stats = []
    for name in names:
        count, size = operator_dlq.get(name, [0, 0])
        entry: dict[str, Any] = {
            "name": name,
            "dlqMessageCount": count,
            "dlqMessageSize": size / scale if scale != 1 else size,
        }
        if name == "SourceOperator":
            entry["inputMessageCount"] = current["inputMessageCount"]
            entry["inputMessageSize"] = current["inputMessageSize"]
            entry["outputMessageCount"] = current["inputMessageCount"]
        if operators and name == operators[-1]:
            entry["outputMessageCount"] = current["outputMessageCount"]
        if name == THROTTLE_OPERATOR:
            entry.update({counter: current[counter] for counter in THROTTLE_COUNTERS})
        if name in current[OPERATOR_STATS]:
            entry.update(public_stats(current[OPERATOR_STATS][name]))
        stats.append(entry)
    return stats
