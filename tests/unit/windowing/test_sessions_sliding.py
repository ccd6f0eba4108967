"""Session rules (§3.6 `$sessionWindow`) and KIP-450 sliding-window arithmetic."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.sessions import (
    SessionSpan,
    merge_session_spans,
    session_closes,
    session_is_late,
    sessions_mergeable,
)
from pipeline_stages._windowing.sliding import SlidingGeometry

S = 1_000


class TestSessions:
    def test_same_session_when_difference_is_less_than_gap(self) -> None:
        assert sessions_mergeable(SessionSpan.of(0), SessionSpan.of(4_999), 5 * S)

    def test_difference_equal_to_gap_starts_a_new_session(self) -> None:
        assert not sessions_mergeable(SessionSpan.of(0), SessionSpan.of(5 * S), 5 * S)

    def test_overlapping_spans_merge(self) -> None:
        assert sessions_mergeable(SessionSpan(0, 10 * S), SessionSpan(3 * S, 4 * S), 1)

    def test_out_of_order_event_bridges_two_sessions(self) -> None:
        merged, absorbed = merge_session_spans(
            [SessionSpan.of(8 * S), SessionSpan.of(0)], 4 * S, 5 * S
        )
        assert merged == SessionSpan(0, 8 * S)
        assert absorbed == [SessionSpan.of(0), SessionSpan.of(8 * S)]

    def test_event_far_from_every_session_starts_its_own(self) -> None:
        merged, absorbed = merge_session_spans([SessionSpan(0, 1 * S)], 20 * S, 5 * S)
        assert merged == SessionSpan.of(20 * S)
        assert absorbed == []

    def test_window_end_is_last_event_plus_gap(self) -> None:
        assert SessionSpan(2 * S, 8 * S).window_end(5 * S) == 13 * S

    def test_closes_when_adjusted_watermark_reaches_end(self) -> None:
        span = SessionSpan(0, 8 * S)
        assert not session_closes(span, 13 * S - 1, 5 * S)
        assert session_closes(span, 13 * S, 5 * S)

    def test_late_only_without_an_open_session(self) -> None:
        assert session_is_late(10, 11, has_open_session=False)
        assert not session_is_late(10, 11, has_open_session=True)
        assert not session_is_late(11, 11, has_open_session=False)
        assert not session_is_late(10, None, has_open_session=False)


class TestSliding:
    def test_kafka_javadoc_example_five_windows(self) -> None:
        # SlidingWindows javadoc: td 5000 ms, records at 8000, 9200, 12400.
        g = SlidingGeometry(time_difference_ms=5_000, grace_ms=0)
        times = [8_000, 9_200, 12_400]
        assert g.window_starts(times) == [3_000, 4_200, 7_400, 8_001, 9_201]
        contents = {
            s: [times[i] for i in range(*g.records_in(times, s))] for s in g.window_starts(times)
        }
        assert contents == {
            3_000: [8_000],
            4_200: [8_000, 9_200],
            7_400: [8_000, 9_200, 12_400],
            8_001: [9_200, 12_400],
            9_201: [12_400],
        }

    def test_kip_figure_1_and_2_counts(self) -> None:
        # KIP-450 Figure 1: time difference 10 ms, 7 windows for 4 records; Figure 2: a 1 ms
        # hopping window gives 26 windows for the same 4 records (timestamps chosen to match).
        times = [10, 14, 20, 26]
        assert len(SlidingGeometry(10, 0).window_starts(times)) == 7
        hopping = WindowGeometry(interval_ms=10, hop_ms=1)
        assert len({s for t in times for s in hopping.window_starts(t)}) == 26

    def test_both_ends_inclusive(self) -> None:
        g = SlidingGeometry(10, 0)
        assert g.contains(0, 0) and g.contains(0, 10)
        assert not g.contains(0, 11)

    def test_right_window_only_when_not_empty(self) -> None:
        g = SlidingGeometry(10, 0)
        assert g.window_starts([12, 20]) == [2, 10, 13]
        assert g.window_starts([12]) == [2]

    def test_closes_when_stream_time_passes_end_plus_grace(self) -> None:
        g = SlidingGeometry(5_000, 2_000)
        # Window [3000, 8000]: Kafka closes it once stream time > 10000, i.e. W >= 10000.
        assert not g.closes(3_000, 9_999)
        assert g.closes(3_000, 10_000)

    def test_fully_late_and_left_window_closed(self) -> None:
        g = SlidingGeometry(10, 0)
        assert g.left_window_closed(50, 50) and not g.fully_late(50, 50)
        assert g.fully_late(50, 60)
        assert not g.left_window_closed(50, 49)


@settings(max_examples=200, deadline=None)
@given(
    times=st.lists(st.integers(0, 200), min_size=1, max_size=8, unique=True),
    td=st.integers(1, 30),
    seed=st.randoms(use_true_random=False),
)
def test_incremental_sliding_windows_are_arrival_order_independent(
    times: list[int], td: int, seed: object
) -> None:
    g = SlidingGeometry(td, 0)
    order = list(times)
    seed.shuffle(order)  # type: ignore[attr-defined]
    seen: list[int] = []
    created: set[int] = set()
    for t in order:
        created |= g.new_window_starts(seen, t)
        seen = sorted([*seen, t])
    assert sorted(created) == g.window_starts(times)
    # Every window is defined by its records and non-empty.
    for s in created:
        lo, hi = g.records_in(seen, s)
        assert hi > lo


def test_window_sets_are_distinct_per_window_for_javadoc_example() -> None:
    g = SlidingGeometry(5_000, 0)
    times = [8_000, 9_200, 12_400]
    sets = [tuple(range(*g.records_in(times, s))) for s in g.window_starts(times)]
    assert len(sets) == len(set(sets))
    assert list(itertools.chain.from_iterable(sets)).count(0) == 3
