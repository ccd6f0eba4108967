"""Watermarks (§4.2, §4.6) and the idle-timeout close rule (§4.5)."""

from __future__ import annotations

import pytest

from pipeline_stages._windowing.watermark import (
    INITIAL_WATERMARK,
    PartitionWatermarks,
    idle_close_end,
)

S = 1_000
MIN = 60 * S
#: 2024-01-01T12:00:00Z, the "12:00" of the seed tables.
NOON = 1_704_110_400_000


class TestSinglePartition:
    def test_starts_at_minus_one(self) -> None:
        assert PartitionWatermarks.start().combined == INITIAL_WATERMARK == -1

    def test_is_max_event_time_minus_one_ms(self) -> None:
        wm = PartitionWatermarks.start().observe(0, 30 * S, now_ms=0)
        assert wm.combined == 29_999  # testWindowMinMaxStats: 29.999 after an event at 30.000

    def test_never_decreases(self) -> None:
        wm = PartitionWatermarks.start().observe(0, 30 * S, 0).observe(0, 10 * S, 0)
        assert wm.combined == 29_999


class TestPartitions:
    def test_combined_is_min_over_partitions(self) -> None:
        wm = PartitionWatermarks.start(2).observe(0, 10 * S, 0).observe(1, 30 * S, 0)
        assert wm.combined == 10 * S - 1

    def test_silent_partition_stalls_without_idle_timeout(self) -> None:
        wm = PartitionWatermarks.start(2).observe(0, 30 * S, 0)
        assert wm.combined == INITIAL_WATERMARK
        assert wm.recombine(now_ms=10 * MIN).combined == INITIAL_WATERMARK

    def test_idle_partition_is_ignored(self) -> None:
        wm = PartitionWatermarks.start(2, partition_idle_timeout_ms=5 * S)
        wm = wm.observe(0, 10 * S, now_ms=0).observe(1, 30 * S, now_ms=4 * S)
        assert wm.combined == 10 * S - 1
        assert not wm.is_idle(0, 4_999)
        assert wm.is_idle(0, 5 * S)
        assert wm.recombine(now_ms=5 * S).combined == 30 * S - 1

    def test_returning_partition_cannot_pull_watermark_back(self) -> None:
        wm = PartitionWatermarks.start(2, partition_idle_timeout_ms=5 * S)
        wm = wm.observe(0, 10 * S, 0).observe(1, 30 * S, 4 * S).recombine(5 * S)
        wm = wm.observe(0, 12 * S, now_ms=6 * S)
        assert wm.combined == 30 * S - 1

    def test_all_idle_keeps_value(self) -> None:
        wm = PartitionWatermarks.start(2, partition_idle_timeout_ms=S)
        wm = wm.observe(0, 10 * S, 0).observe(1, 20 * S, 0)
        assert wm.recombine(now_ms=2 * S).combined == 10 * S - 1

    def test_idle_transitions_in_order(self) -> None:
        wm = PartitionWatermarks.start(2, partition_idle_timeout_ms=5 * S)
        wm = wm.observe(0, 1, now_ms=0).observe(1, 1, now_ms=3 * S)
        assert wm.idle_transitions(0, 10 * S) == [5 * S, 8 * S]
        assert wm.idle_transitions(5 * S, 7 * S) == []

    def test_rejects_zero_partitions(self) -> None:
        with pytest.raises(ValueError, match="at least one partition"):
            PartitionWatermarks.start(0)


class TestIdleCloseRule:
    """The seed's idleness table: 3-minute tumbling windows, 1-minute idle timeout, 3 s lateness."""

    lateness = 3 * S

    def test_first_window_survives_three_idle_minutes(self) -> None:
        # Event 12:00 -> W' = 11:59:59.999 - 3 s; [12:00, 12:03) has 3:03.001 remaining.
        adjusted = NOON - 1 - self.lateness
        end = NOON + 3 * MIN
        assert (
            idle_close_end(
                [end], adjusted_watermark=adjusted, idle_duration_ms=3 * MIN, idle_timeout_ms=MIN
            )
            is None
        )

    def test_second_window_closes_after_two_idle_minutes(self) -> None:
        # Event 12:05 -> W' = 12:04:56.999; [12:03, 12:06) has 1:03.001 remaining.
        adjusted = NOON + 5 * MIN - 1 - self.lateness
        end = NOON + 6 * MIN
        assert (
            idle_close_end(
                [end], adjusted_watermark=adjusted, idle_duration_ms=MIN, idle_timeout_ms=MIN
            )
            is None
        )
        assert (
            idle_close_end(
                [end], adjusted_watermark=adjusted, idle_duration_ms=2 * MIN, idle_timeout_ms=MIN
            )
            == end
        )

    def test_needs_the_idle_timeout_even_when_windows_are_due(self) -> None:
        assert (
            idle_close_end([10], adjusted_watermark=100, idle_duration_ms=5, idle_timeout_ms=6)
            is None
        )

    def test_closes_latest_due_window_and_everything_before(self) -> None:
        # DOC example: 12:00-13:00 window, last event 12:02 (lateness 0): timeout 10 min closes at
        # 58 min of idleness (the remaining time); timeout 2 h closes at 2 h.
        adjusted = NOON + 2 * MIN - 1
        end = NOON + 60 * MIN
        common = {"adjusted_watermark": adjusted}
        assert (
            idle_close_end([end], idle_duration_ms=58 * MIN, idle_timeout_ms=10 * MIN, **common)
            is None
        )
        assert (
            idle_close_end([end], idle_duration_ms=58 * MIN + 1, idle_timeout_ms=10 * MIN, **common)
            == end
        )
        assert (
            idle_close_end([end], idle_duration_ms=119 * MIN, idle_timeout_ms=120 * MIN, **common)
            is None
        )
        ends = [NOON + 3 * MIN, NOON + 6 * MIN, NOON + 90 * MIN]
        assert (
            idle_close_end(ends, idle_duration_ms=10 * MIN, idle_timeout_ms=MIN, **common)
            == NOON + 6 * MIN
        )

    def test_no_open_windows(self) -> None:
        assert (
            idle_close_end([], adjusted_watermark=0, idle_duration_ms=10, idle_timeout_ms=1) is None
        )
