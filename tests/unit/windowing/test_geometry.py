"""Fixed-window arithmetic (atlas-semantics.md §4.1, §4.3, §4.4) and its numpy variants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_stages._windowing.geometry import (
    Lateness,
    Window,
    WindowGeometry,
    closes,
    closes_np,
    min_open_starts_np,
    running_watermark_np,
)

S = 1_000
MIN = 60 * S
HOUR = 60 * MIN
#: 2024-01-01T00:00:00Z, a multiple of every interval used below.
BASE = 1_704_067_200_000


def starts(geometry: WindowGeometry, t: int) -> list[int]:
    return [w.start for w in geometry.windows_of(t)]


# --------------------------------------------------------------------------- assignment


class TestTumbling:
    def test_window_of_a_time_is_the_epoch_aligned_interval(self) -> None:
        g = WindowGeometry.tumbling(5 * S)
        assert g.windows_of(BASE + 12_345) == [Window(BASE + 10 * S, BASE + 15 * S)]

    def test_event_at_end_belongs_to_next_window(self) -> None:
        g = WindowGeometry.tumbling(5 * S)
        assert g.windows_of(BASE + 15 * S) == [Window(BASE + 15 * S, BASE + 20 * S)]
        assert g.windows_of(BASE + 15 * S - 1) == [Window(BASE + 10 * S, BASE + 15 * S)]

    def test_offset_shifts_boundaries(self) -> None:
        # Day windows shifted 8 h ahead of UTC start at 08:00Z (§4.1 offset example).
        g = WindowGeometry.tumbling(24 * HOUR, offset_ms=8 * HOUR)
        assert starts(g, BASE + 5 * HOUR) == [BASE - 16 * HOUR]
        assert starts(g, BASE + 9 * HOUR) == [BASE + 8 * HOUR]

    def test_negative_offset(self) -> None:
        g = WindowGeometry.tumbling(HOUR, offset_ms=-30 * MIN)
        assert starts(g, BASE + 10 * MIN) == [BASE - 30 * MIN]
        assert starts(g, BASE + 40 * MIN) == [BASE + 30 * MIN]

    def test_tumbling_is_hopping_with_hop_equal_interval(self) -> None:
        assert WindowGeometry.tumbling(7 * S, 3) == WindowGeometry(7 * S, 7 * S, 3)


class TestHopping:
    def test_atlas_window_js_interval_5s_hop_2s(self) -> None:
        # window.js testHoppingWindowOverlappingWindows: windows [25,30), [27,32), [29,34).
        g = WindowGeometry(interval_ms=5 * S, hop_ms=2 * S)
        assert g.windows_of(29 * S) == [
            Window(25 * S, 30 * S),
            Window(27 * S, 32 * S),
            Window(29 * S, 34 * S),
        ]

    def test_non_dividing_hop_gives_two_or_three_windows(self) -> None:
        g = WindowGeometry(interval_ms=5 * S, hop_ms=2 * S)
        assert starts(g, 30 * S) == [27 * S, 29 * S]
        assert starts(g, 29 * S) == [25 * S, 27 * S, 29 * S]

    def test_ends_are_aligned_to_offset_modulo_hop(self) -> None:
        g = WindowGeometry(interval_ms=5 * S, hop_ms=2 * S, offset_ms=1 * S)
        assert {w.end % (2 * S) for w in g.windows_of(BASE + 17_500)} == {1 * S}

    def test_atlas_doc_20s_interval_5s_hop_overlaps_four_windows(self) -> None:
        g = WindowGeometry(interval_ms=20 * S, hop_ms=5 * S)
        assert starts(g, BASE + 12 * S) == [BASE - 5 * S, BASE, BASE + 5 * S, BASE + 10 * S]

    def test_atlas_doc_3s_interval_5s_hop_leaves_2s_gaps(self) -> None:
        g = WindowGeometry(interval_ms=3 * S, hop_ms=5 * S)
        assert g.windows_of(BASE + 3 * S) == [Window(BASE + 2 * S, BASE + 5 * S)]
        assert g.windows_of(BASE + 4999) == [Window(BASE + 2 * S, BASE + 5 * S)]
        assert g.windows_of(BASE + 5 * S) == []
        assert g.windows_of(BASE + 6999) == []
        assert g.windows_of(BASE + 7 * S) == [Window(BASE + 7 * S, BASE + 10 * S)]

    def test_gap_oldest_start_is_next_window(self) -> None:
        g = WindowGeometry(interval_ms=3 * S, hop_ms=5 * S)
        assert g.oldest_start(BASE + 6 * S) == BASE + 7 * S

    def test_oldest_start_clamps_at_zero_near_the_epoch(self) -> None:
        # §4.1 "clamped at >= 0": 1000 - 5000 + 2000 - 1000 = -3000 -> 0.
        g = WindowGeometry(interval_ms=5 * S, hop_ms=2 * S)
        assert g.oldest_start(1 * S) == 0
        assert g.windows_of(1 * S) == [Window(0, 5 * S)]

    def test_rejects_non_positive_sizes(self) -> None:
        with pytest.raises(ValueError, match="must be > 0"):
            WindowGeometry(interval_ms=0, hop_ms=1)
        with pytest.raises(ValueError, match="must be > 0"):
            WindowGeometry(interval_ms=1, hop_ms=-1)


@settings(max_examples=300, deadline=None)
@given(
    interval=st.integers(1, 50),
    hop=st.integers(1, 50),
    offset=st.integers(-100, 100),
    t=st.integers(10_000, 20_000),
)
def test_windows_match_brute_force_grid(interval: int, hop: int, offset: int, t: int) -> None:
    g = WindowGeometry(interval, hop, offset)
    grid = [s for s in range(t - interval + 1, t + 1) if (s - (offset - interval)) % hop == 0]
    assert starts(g, t) == grid
    count = len(grid)
    if hop <= interval:
        assert count in (interval // hop, -(-interval // hop))
    else:
        assert count in (0, 1)
    assert all(w.contains(t) and w.end - w.start == interval for w in g.windows_of(t))


# --------------------------------------------------------------------------- closing


class TestCloses:
    def test_event_at_end_does_not_close_with_zero_lateness(self) -> None:
        # window.js: hopping [39,44) stays open when max = 44.000 (W = 43.999).
        assert not closes(44 * S, 44 * S - 1, 0)

    def test_event_one_ms_after_end_closes(self) -> None:
        # window.js: tumbling [33,34) closes when max = 34.001 (W = 34.000).
        assert closes(34 * S, 34_001 - 1, 0)

    def test_late_data_example_three_second_lateness(self) -> None:
        # lateDataExample: [02:00:00, 02:00:10) with 3 s lateness closes after 02:00:14.
        end = BASE + 2 * HOUR + 10 * S
        assert not closes(end, BASE + 2 * HOUR + 13 * S - 1, 3 * S)
        assert closes(end, BASE + 2 * HOUR + 14 * S - 1, 3 * S)

    def test_vectorised(self) -> None:
        ends = np.array([10, 20, 30], dtype=np.int64)
        assert closes_np(ends, 23, 3).tolist() == [True, True, False]


# --------------------------------------------------------------------------- lateness


class TestLateness:
    g = WindowGeometry(interval_ms=5 * S, hop_ms=2 * S)

    def test_min_open_start_is_oldest_start_of_adjusted_watermark(self) -> None:
        # W' = 31 s: [25,30) has closed, [27,32) is the oldest still open.
        assert self.g.min_open_start(31 * S) == 27 * S

    def test_partially_late_document(self) -> None:
        min_open = self.g.min_open_start(31 * S)
        assert self.g.classify(29 * S, min_open) is Lateness.PARTIAL
        assert self.g.missed_starts(29 * S, min_open) == [25 * S]
        assert self.g.open_starts(29 * S, min_open) == [27 * S, 29 * S]

    def test_fully_late_document(self) -> None:
        min_open = self.g.min_open_start(31 * S)
        assert self.g.classify(26 * S, min_open) is Lateness.LATE
        assert self.g.missed_starts(26 * S, min_open) == [23 * S, 25 * S]
        assert self.g.open_starts(26 * S, min_open) == []

    def test_on_time_document(self) -> None:
        min_open = self.g.min_open_start(31 * S)
        assert self.g.classify(31 * S, min_open) is Lateness.ON_TIME
        assert self.g.missed_starts(31 * S, min_open) == []

    def test_tumbling_late_reduces_to_closed_window(self) -> None:
        g = WindowGeometry.tumbling(5 * S)
        min_open = g.min_open_start(12 * S)
        assert min_open == 10 * S
        assert g.missed_starts(9_999, min_open) == [5 * S]
        assert g.classify(10 * S, min_open) is Lateness.ON_TIME

    def test_gap_document_is_neither_late_nor_counted(self) -> None:
        g = WindowGeometry(interval_ms=3 * S, hop_ms=5 * S)
        min_open = g.min_open_start(BASE + 60 * S)
        assert g.classify(BASE + 6 * S, min_open) is Lateness.GAP
        assert g.missed_starts(BASE + 6 * S, min_open) == []


# --------------------------------------------------------------------------- numpy variants


@settings(max_examples=150, deadline=None)
@given(
    interval=st.integers(1, 40),
    hop=st.integers(1, 40),
    offset=st.integers(-50, 50),
    ts=st.lists(st.integers(0, 5_000), min_size=1, max_size=30),
    min_open=st.integers(0, 5_000),
)
def test_numpy_variants_agree_with_scalar(
    interval: int, hop: int, offset: int, ts: list[int], min_open: int
) -> None:
    g = WindowGeometry(interval, hop, offset)
    arr = np.array(ts, dtype=np.int64)
    assert g.oldest_start_np(arr).tolist() == [g.oldest_start(t) for t in ts]

    rows, got_starts = g.assign_np(arr)
    expected = [(i, s) for i, t in enumerate(ts) for s in g.window_starts(t)]
    assert list(zip(rows.tolist(), got_starts.tolist(), strict=True)) == expected

    rows, got_starts = g.assign_np(arr, min_open_start=min_open)
    expected = [(i, s) for i, t in enumerate(ts) for s in g.open_starts(t, min_open)]
    assert list(zip(rows.tolist(), got_starts.tolist(), strict=True)) == expected

    mask = g.late_mask_np(arr, min_open)
    assert mask.tolist() == [bool(g.missed_starts(t, min_open)) for t in ts]


def test_late_mask_accepts_per_row_min_open_start() -> None:
    g = WindowGeometry.tumbling(10)
    ts = np.array([5, 5, 25], dtype=np.int64)
    per_row = np.array([0, 10, 20], dtype=np.int64)
    assert g.late_mask_np(ts, per_row).tolist() == [False, True, False]


@settings(max_examples=150, deadline=None)
@given(
    interval=st.integers(1, 40),
    hop=st.integers(1, 40),
    lateness=st.integers(0, 30),
    ts=st.lists(st.integers(0, 2_000), max_size=40),
    start_watermark=st.integers(-1, 500),
)
def test_vectorised_arrival_order_lateness_matches_sequential(
    interval: int, hop: int, lateness: int, ts: list[int], start_watermark: int
) -> None:
    g = WindowGeometry(interval, hop)
    start_min_open = g.min_open_start(start_watermark - lateness)
    # Sequential, one document at a time (§4.2 note): decide, then advance the watermark.
    watermark, min_open, expected = start_watermark, start_min_open, []
    for t in ts:
        expected.append(bool(g.missed_starts(t, min_open)))
        watermark = max(watermark, t - 1)
        min_open = max(min_open, g.min_open_start(watermark - lateness))
    before, after = running_watermark_np(np.array(ts, dtype=np.int64), start_watermark)
    per_row = min_open_starts_np(
        g, before, allowed_lateness_ms=lateness, min_open_start=start_min_open
    )
    assert g.late_mask_np(np.array(ts, dtype=np.int64), per_row).tolist() == expected
    assert after == watermark


def test_running_watermark_is_monotonic_and_starts_at_minus_one() -> None:
    before, after = running_watermark_np(np.array([10, 5, 20], dtype=np.int64))
    assert before.tolist() == [-1, 9, 9]
    assert after == 19


def test_the_global_window_holds_dates_before_the_epoch() -> None:
    """Atlas's windows start at the epoch or later (§4.1 clamp) and leave earlier dates out;
    `$globalWindow`'s one window holds every date from year 1 to 9999."""
    global_window = WindowGeometry.global_window()
    dates = [-62_135_596_800_000, -5_000, 0, 253_402_300_799_999]
    assert [global_window.window_starts(t) for t in dates] == [[0]] * 4
    starts, contains = global_window.grid_np(np.array(dates, dtype=np.int64))
    assert starts.tolist() == [[0]] * 4 and contains.all()
    assert WindowGeometry.tumbling(10_000).window_starts(-5_000) == []  # Atlas's rule
