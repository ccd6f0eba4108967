"""`$throttle`'s figures in the processor stats: counted per batch, replaced on a replay,
shown as Atlas's `throttle.throttledTimeMs` / `throttle.throttleEvents` and per operator."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._connectors.sources.rate_limit import OFFSET_KEY
from service.manager.stats import LiveStats
from service.stores.stats_ledger import StatsLedger

WHEN = datetime(2026, 1, 1, tzinfo=UTC)


def _public(stats: LiveStats, operators: tuple[str, ...] = ()) -> dict[str, Any]:
    return stats.public(
        name="p",
        processor_id="id",
        status="running",
        last_state_change=WHEN,
        operators=operators,
        verbose=True,
    )


def _batch(stats: LiveStats, batch_id: int, waited_ms: int, events: int) -> None:
    stats.record_batch(
        batch_id,
        output_sizes=[],
        dlq_records=[],
        window_stats=[],
        input_metrics={
            "count": 3,
            "bytes": 30,
            "throttledTimeMs": waited_ms,
            "throttleEvents": events,
        },
    )


def test_batches_add_up_and_a_replay_replaces_its_own_figures() -> None:
    stats = LiveStats(input_from_progress=False)
    _batch(stats, 0, 0, 1)
    _batch(stats, 1, 250, 1)
    _batch(stats, 1, 250, 1)  # replayed after a crash: same offsets, same figures
    _batch(stats, 2, 0, 0)
    public = _public(stats, ("SourceOperator", "ThrottleOperator"))
    assert public["throttle"] == {"throttledTimeMs": 250, "throttleEvents": 2}
    operator = next(o for o in public["operatorStats"] if o["name"] == "ThrottleOperator")
    assert (operator["throttledTimeMs"], operator["throttleEvents"]) == (250, 2)
    assert public["inputMessageCount"] == 9


def test_the_figures_survive_the_stored_record_and_the_ledger() -> None:
    stats = LiveStats(input_from_progress=False)
    _batch(stats, 0, 40, 1)
    stored = stats.to_record()
    assert stored["throttle"] == {"throttledTimeMs": 40, "throttleEvents": 1}
    reread = StatsLedger.from_json(stats._ledger.to_json())
    again = LiveStats(stored, ledger=reread, input_from_progress=False)
    assert _public(again)["throttle"] == {"throttledTimeMs": 40, "throttleEvents": 1}
    # A record from before the ledger seeds it.
    assert _public(LiveStats(stored))["throttle"] == {"throttledTimeMs": 40, "throttleEvents": 1}


def test_without_throttle_nothing_is_shown() -> None:
    stats = LiveStats(input_from_progress=False)
    _batch(stats, 0, 0, 0)
    assert "throttle" not in _public(stats, ("SourceOperator",))


def test_progress_reports_carry_the_figures_in_the_end_offset() -> None:
    stats = LiveStats(input_from_progress=True)
    end = {"index": 5, OFFSET_KEY: {"throttledTimeMs": 120, "throttleEvents": 1}}
    stats.record_progress(
        {"batchId": 0, "numInputRows": 5, "sources": [{"endOffset": json.dumps(end)}]}
    )
    assert _public(stats, ("ThrottleOperator",))["throttle"] == {
        "throttledTimeMs": 120,
        "throttleEvents": 1,
    }


def test_the_cli_table_shows_nested_operator_stats_as_columns() -> None:
    from service.cli.processors import _flat

    flat = _flat({"name": "HttpsOperator", "latencyMs": {"p50": 5.0, "p99": 50.0}})
    assert flat == {"name": "HttpsOperator", "latencyMs.p50": 5.0, "latencyMs.p99": 50.0}
