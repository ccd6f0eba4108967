"""The stats ledger in every store: a batch's counts are recorded once per batch id, a replay
replaces them, and they survive a reopen (a restart after `kill -9`)."""

from __future__ import annotations

from service.stores.stats_ledger import LANE_BATCHES, LANE_PROGRESS
from tests.contract.conftest import Harness

PID = "0123456789abcdef01234567"


def part(outputs: int, dlq: int = 0, *, inputs: int | None = None) -> dict[str, object]:
    counts: dict[str, object] = {
        "outputMessageCount": outputs,
        "outputMessageSize": outputs * 10,
        "dlqMessageCount": dlq,
        "dlqMessageSize": dlq * 100,
        "operatorDlq": {"AddFieldsOperator": [dlq, dlq * 100]} if dlq else {},
    }
    if inputs is not None:
        counts["inputMessageCount"] = inputs
        counts["inputMessageSize"] = inputs * 7
    return counts


def test_a_replayed_batch_replaces_its_counts_and_survives_a_reopen(harness: Harness) -> None:
    stats = harness.stores.stats
    assert stats.get(PID) is None
    stats.record(PID, LANE_BATCHES, 1, 0, part(2, 1, inputs=3))
    stats.record(PID, LANE_BATCHES, 1, 1, part(5, inputs=5))
    stats.record(PID, LANE_BATCHES, 1, 1, part(5, inputs=5))  # replayed after a crash
    stats.record(PID, LANE_BATCHES, 1, 0, part(9, inputs=9))  # older: folded in already
    stats = harness.reopen().stats
    ledger = stats.get(PID)
    assert ledger is not None
    current = ledger.current()
    assert current["inputMessageCount"] == 8 and current["inputMessageSize"] == 56
    assert (current["outputMessageCount"], current["outputMessageSize"]) == (7, 70)
    assert (current["dlqMessageCount"], current["dlqMessageSize"]) == (1, 100)
    assert current["operatorDlq"] == {"AddFieldsOperator": [1, 100]}
    # A fresh checkpoint: batch ids start at 0 again in the next generation.
    ledger = stats.record(PID, LANE_BATCHES, 2, 0, part(1, inputs=1))
    assert ledger.current()["outputMessageCount"] == 8


def test_lanes_keep_their_own_batches_and_a_seed_starts_the_ledger(harness: Harness) -> None:
    stats = harness.stores.stats
    seed = {"inputMessageCount": 100, "outputMessageCount": 40, "_operatorDlq": {"X": [2, 20]}}
    stats.record(PID, LANE_BATCHES, 1, 7, part(3), seed=seed)
    stats.record(PID, LANE_PROGRESS, 1, 6, {"inputMessageCount": 4, "inputMessageSize": 40})
    stats.record(PID, LANE_PROGRESS, 1, 7, {"inputMessageCount": 5, "inputMessageSize": 50})
    stats.record(PID, LANE_BATCHES, 1, 8, part(1), seed={"inputMessageCount": 999})
    current = harness.reopen().stats.get(PID).current()  # type: ignore[union-attr]
    assert current["inputMessageCount"] == 109 and current["inputMessageSize"] == 90
    assert current["outputMessageCount"] == 44
    assert current["operatorDlq"] == {"X": [2, 20]}
    assert harness.stores.stats.delete(PID)
    assert harness.stores.stats.get(PID) is None
