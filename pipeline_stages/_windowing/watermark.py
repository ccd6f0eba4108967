"""Watermarks (atlas-semantics.md §4.2, §4.6) and the idle-timeout close rule (§4.5).

Two clocks meet here, and keeping them in one small module is the point (style guide E.15):
event time drives the watermark, processing time drives partition idleness and
`idleTimeout`. Both are plain integer milliseconds supplied by the caller, so tests (and the
conformance executor) drive processing time explicitly instead of sleeping.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

#: §4.2: "It is monotonic and starts at -1".
INITIAL_WATERMARK = -1


@dataclass(frozen=True)
class PartitionState:
    """One source partition: the max event time it produced and when it last produced.

    Attributes:
        max_event_ms: greatest event time seen on the partition, None before its first event.
        last_active_ms: processing time of its latest message (the start time before any).
    """

    max_event_ms: int | None
    last_active_ms: int

    @property
    def watermark(self) -> int:
        """§4.6: the partition watermark is `max ts in that partition - 1 ms`."""
        return INITIAL_WATERMARK if self.max_event_ms is None else self.max_event_ms - 1


@dataclass(frozen=True)
class PartitionWatermarks:
    """The combined watermark of a partitioned source (§4.2, §4.6).

    The combined value is the minimum over partitions that are not idle, and never decreases.
    A partition is idle once it has produced nothing for `partition_idle_timeout_ms` of
    processing time (disabled when None, Atlas's default, so one silent partition stalls every
    window). When every partition is idle the combined value stays where it is.
    """

    partitions: tuple[PartitionState, ...]
    combined: int = INITIAL_WATERMARK
    partition_idle_timeout_ms: int | None = None

    @classmethod
    def start(
        cls, n_partitions: int = 1, *, partition_idle_timeout_ms: int | None = None, now_ms: int = 0
    ) -> PartitionWatermarks:
        """Fresh watermarks for `n_partitions` partitions, none of which has produced yet."""
        if n_partitions < 1:
            raise ValueError(f"a source has at least one partition, got {n_partitions}")
        state = PartitionState(max_event_ms=None, last_active_ms=now_ms)
        return cls(
            partitions=(state,) * n_partitions,
            partition_idle_timeout_ms=partition_idle_timeout_ms,
        )

    def is_idle(self, partition: int, now_ms: int) -> bool:
        """True when the partition has been silent for at least the partition idle timeout."""
        if self.partition_idle_timeout_ms is None:
            return False
        silent_for = now_ms - self.partitions[partition].last_active_ms
        return silent_for >= self.partition_idle_timeout_ms

    def observe(self, partition: int, event_ms: int, now_ms: int) -> PartitionWatermarks:
        """Record an event on `partition` at processing time `now_ms`, then recombine."""
        old = self.partitions[partition]
        new_max = event_ms if old.max_event_ms is None else max(old.max_event_ms, event_ms)
        parts = list(self.partitions)
        parts[partition] = PartitionState(max_event_ms=new_max, last_active_ms=now_ms)
        return replace(self, partitions=tuple(parts)).recombine(now_ms)

    def recombine(self, now_ms: int) -> PartitionWatermarks:
        """Recompute the combined watermark at processing time `now_ms` (monotonic)."""
        active = [p.watermark for i, p in enumerate(self.partitions) if not self.is_idle(i, now_ms)]
        if not active:
            return self
        return replace(self, combined=max(self.combined, min(active)))

    def idle_transitions(self, from_ms: int, to_ms: int) -> list[int]:
        """Processing times in `(from_ms, to_ms]` at which some partition turns idle, sorted.

        The combined watermark can rise at each of them (a lagging partition stops holding it
        back), so a caller advancing the clock recombines at each instant in order.
        """
        if self.partition_idle_timeout_ms is None:
            return []
        instants = {p.last_active_ms + self.partition_idle_timeout_ms for p in self.partitions}
        return sorted(t for t in instants if from_ms < t <= to_ms)


def idle_close_end(
    open_window_ends: Iterable[int],
    *,
    adjusted_watermark: int,
    idle_duration_ms: int,
    idle_timeout_ms: int,
) -> int | None:
    """§4.5: the end of the latest window an idle source closes, or None.

    Once the source has been idle for `idleDuration >= idleTimeout`, every window whose
    remaining time `end - W'` is at most `idleDuration` closes, together with all earlier
    windows; `W'` is the greatest `watermark - allowedLateness` received so far. This is the
    doc's "idle for longer than the greater of the remaining window time or idleTimeout".
    Callers then raise `min_open_start` to `oldestStart(returned end)`, which makes later
    documents for those windows late.
    """
    if idle_duration_ms < idle_timeout_ms:
        return None
    due = [end for end in open_window_ends if end - adjusted_watermark <= idle_duration_ms]
    return max(due) if due else None


def first_idle_close_ms(
    open_window_ends: Iterable[int],
    *,
    adjusted_watermark: int,
    last_input_ms: int,
    idle_timeout_ms: int,
) -> int | None:
    """The first processing time at which `idle_close_end` closes a window, if no input
    comes first (None without open windows).

    The idle duration must reach both the timeout and a window's `end - W'`, so the window
    with the earliest end closes first: at `last input + max(timeout, earliest end - W')`.
    """
    ends = list(open_window_ends)
    if not ends:
        return None
    return last_input_ms + max(idle_timeout_ms, min(ends) - adjusted_watermark)
