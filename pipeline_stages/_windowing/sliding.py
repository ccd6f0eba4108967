"""Sliding windows after Kafka's KIP-450, for Sluice's `$slidingWindow` extension stage.

A sliding window `[start, start + timeDifference]` is inclusive at *both* ends. Windows are
defined by the records, not by a grid: a record at `t` defines

* its *left* window `[t - timeDifference, t]`, which always holds the record itself, and
* its *right* window `[t + 1, t + 1 + timeDifference]`, which exists only when some other
  record falls into it (empty windows are never created).

The set of windows is therefore a function of the set of record times, whatever the arrival
order (KIP-450 "Out-of-order Records"). A window closes, and its final aggregate is emitted,
when `W - grace >= end` (Kafka: "stream-time > window-end + grace-period"; with
`W = stream-time - 1 ms` this is the §4.3 rule of Atlas windows).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class SlidingGeometry:
    """KIP-450 window arithmetic for one partition key.

    Attributes:
        time_difference_ms: max distance between two records of a window (both ends inclusive).
        grace_ms: how long after `end` a window still accepts out-of-order records.
    """

    time_difference_ms: int
    grace_ms: int

    def __post_init__(self) -> None:
        if self.time_difference_ms <= 0 or self.grace_ms < 0:
            raise ValueError(
                "timeDifference must be > 0 and grace >= 0 ms, got "
                f"{self.time_difference_ms} and {self.grace_ms}"
            )

    def end_of(self, start: int) -> int:
        """The inclusive end of the window starting at `start`."""
        return start + self.time_difference_ms

    def contains(self, start: int, t: int) -> bool:
        """`start <= t <= end`: both ends inclusive."""
        return start <= t <= self.end_of(start)

    def left_start(self, t: int) -> int:
        """Start of the left window of a record at `t`: the window that ends at `t`."""
        return t - self.time_difference_ms

    def right_start(self, t: int) -> int:
        """Start of the right window of a record at `t`: it starts 1 ms after `t`."""
        return t + 1

    def closes(self, start: int, watermark: int) -> bool:
        """True once `W - grace >= end`; `watermark` is `W` (max event time - 1 ms)."""
        return watermark - self.grace_ms >= self.end_of(start)

    def window_starts(self, times: Iterable[int]) -> list[int]:
        """Every window KIP-450 defines for a set of record times, sorted by start.

        Left windows of all records, plus the right window of each record that has another
        record in `(t, t + 1 + timeDifference]`. Duplicates (a right window equal to a left
        one) are one window.
        """
        ordered = sorted(set(times))
        starts = {self.left_start(t) for t in ordered}
        for t in ordered:
            if self.has_record_in_right_window(ordered, t):
                starts.add(self.right_start(t))
        return sorted(starts)

    def has_record_in_right_window(self, sorted_times: Sequence[int], t: int) -> bool:
        """True when a record lies in `(t, t + 1 + timeDifference]` (right window not empty)."""
        i = bisect.bisect_right(sorted_times, t)
        return i < len(sorted_times) and sorted_times[i] <= self.end_of(self.right_start(t))

    def new_window_starts(self, sorted_times: Sequence[int], t: int) -> set[int]:
        """Windows that become defined when a record at `t` joins records `sorted_times`.

        Its own left window, its right window when a later record exists, and the right
        windows of earlier records that `t` now makes non-empty (KIP-450 "Processing Windows").
        Callers drop the ones that already exist or have closed.
        """
        created = {self.left_start(t)}
        i = bisect.bisect_right(sorted_times, t)
        if i < len(sorted_times) and sorted_times[i] <= self.end_of(self.right_start(t)):
            created.add(self.right_start(t))
        j = bisect.bisect_left(sorted_times, t)
        # Earlier records r with t in (r, r + 1 + timeDifference], i.e. r >= t - 1 - td.
        lo = bisect.bisect_left(sorted_times, t - 1 - self.time_difference_ms)
        for r in sorted_times[lo:j]:
            created.add(self.right_start(r))
        return created

    def records_in(self, sorted_times: Sequence[int], start: int) -> tuple[int, int]:
        """Index range `[lo, hi)` of the records inside the window starting at `start`."""
        lo = bisect.bisect_left(sorted_times, start)
        hi = bisect.bisect_right(sorted_times, self.end_of(start))
        return lo, hi

    def fully_late(self, t: int, watermark: int) -> bool:
        """Every window that could contain `t` has closed: even `[t, t + td]` has ended.

        Kafka drops such a record (`t + 1 + td <= stream-time - grace`).
        """
        return watermark - self.grace_ms >= t + self.time_difference_ms

    def left_window_closed(self, t: int, watermark: int) -> bool:
        """The record's own left window `[t - td, t]` has already closed."""
        return self.closes(self.left_start(t), watermark)
