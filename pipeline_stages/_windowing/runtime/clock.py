"""The operator's two clocks: the event-time watermark and processing time (§4.2, §4.5, §4.6).

The watermark is Atlas's: per source partition `max event time - 1 ms`, combined as the
minimum over partitions that are not idle, never decreasing. The operator keeps it itself (in
its state), per document in arrival order, which is what makes results independent of how the
input is cut into micro-batches: `running` returns the watermark in force *before* each
source position, vectorised with numpy.

Processing time moves in segments: a micro-batch is one segment at the batch's processing
time; under the test clock, each clock row starts a new segment at its virtual time. Between
two segments, partitions may turn idle (`partitionIdleTimeout`), and each such instant may
raise the combined watermark (`advance_to`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pipeline_stages._windowing.watermark import first_idle_close_ms, idle_close_end

INITIAL_WATERMARK = -1
_NEVER = np.iinfo(np.int64).min // 4


@dataclass
class Clock:
    """Watermark and processing-time bookkeeping kept in the operator's state.

    Attributes:
        now_ms: processing time of the latest segment (None before the first).
        last_input_ms: processing time of the latest segment with input (the idle timer's
            start: input "takes no time", so idleness is measured from there).
        combined: the combined watermark.
        advanced: whether the watermark ever moved (Atlas's idle close needs one).
        part_max: max event time per partition that produced.
        part_active: processing time of each partition's latest input.
        next_order: arrival number of the next document (orders `$push`, `$first`…).
        last_seq, last_part: source position of the latest document (orders emissions).
    """

    now_ms: int | None = None
    last_input_ms: int | None = None
    combined: int = INITIAL_WATERMARK
    advanced: bool = False
    part_max: dict[int, int] = field(default_factory=dict)
    part_active: dict[int, int] = field(default_factory=dict)
    next_order: int = 0
    last_seq: int = 0
    last_part: int = 0

    def start(self, now_ms: int, partitions: int | None) -> None:
        """Before the first segment: declared partitions exist (and may stall) from now."""
        if self.now_ms is None:
            self.now_ms = now_ms
            for part in range(partitions or 0):
                self.part_active.setdefault(part, now_ms)

    def idle(self, part: int, now_ms: int, timeout_ms: int | None) -> bool:
        """Whether `part` has been silent for `partitionIdleTimeout` at `now_ms`."""
        if timeout_ms is None:
            return False
        return now_ms - self.part_active.get(part, now_ms) >= timeout_ms

    def part_watermark(self, part: int) -> int:
        """§4.6: `max ts in the partition - 1 ms`, -1 before its first event."""
        top = self.part_max.get(part)
        return INITIAL_WATERMARK if top is None else top - 1

    def recombine(self, now_ms: int, timeout_ms: int | None) -> bool:
        """Recompute the combined watermark at `now_ms`; True when it rose."""
        active = [
            self.part_watermark(p) for p in self.part_active if not self.idle(p, now_ms, timeout_ms)
        ]
        if not active or min(active) <= self.combined:
            return False
        self.combined = min(active)
        self.advanced = True
        return True

    def advance_to(
        self, now_ms: int, timeout_ms: int | None, on_rise: Callable[[int], None]
    ) -> None:
        """Let processing time pass to `now_ms`, recombining where partitions turn idle."""
        previous = self.now_ms if self.now_ms is not None else now_ms
        if timeout_ms is not None:
            instants = sorted(
                {
                    t + timeout_ms
                    for t in self.part_active.values()
                    if previous < t + timeout_ms <= now_ms
                }
            )
            for instant in instants:
                if self.recombine(instant, timeout_ms):
                    on_rise(self.combined)
        self.now_ms = now_ms

    def idle_rule(self, idle_timeout_ms: int | None) -> tuple[int, int] | None:
        """`(idleTimeout, latest input time)` when §4.5's idle rule can close anything (a
        timeout is set, the watermark moved at least once, input came), else None."""
        if idle_timeout_ms is None or not self.advanced or self.last_input_ms is None:
            return None
        return idle_timeout_ms, self.last_input_ms

    def idle_close_now(
        self, idle_timeout_ms: int | None, open_ends: list[int], adjusted_watermark: int
    ) -> int | None:
        """What a core's `idle()` closes at `now_ms`: the end of the latest of `open_ends`
        that is due (`idle_close_end`), None when nothing is."""
        rule = self.idle_rule(idle_timeout_ms)
        if rule is None:
            return None
        timeout, since = rule
        return idle_close_end(
            open_ends,
            adjusted_watermark=adjusted_watermark,
            idle_duration_ms=(self.now_ms or 0) - since,
            idle_timeout_ms=timeout,
        )

    def idle_wake_ms(
        self, idle_timeout_ms: int | None, open_ends: list[int], adjusted_watermark: int
    ) -> int | None:
        """When a core's `idle()` first closes one of `open_ends` if no input comes (None: not
        before input): `first_idle_close_ms` under the same rule as `idle_close_now`."""
        rule = self.idle_rule(idle_timeout_ms)
        if rule is None:
            return None
        timeout, since = rule
        return first_idle_close_ms(
            open_ends,
            adjusted_watermark=adjusted_watermark,
            last_input_ms=since,
            idle_timeout_ms=timeout,
        )

    def partition_idle_due_ms(self, timeout_ms: int | None) -> int | None:
        """The next instant after `now_ms` at which a partition turns idle under
        `partitionIdleTimeout` (`advance_to` recombines the watermark there); None when no
        partition is pending."""
        if timeout_ms is None or self.now_ms is None:
            return None
        now = self.now_ms
        return min(
            (t + timeout_ms for t in self.part_active.values() if t + timeout_ms > now),
            default=None,
        )

    def running(
        self,
        parts: npt.NDArray[np.int64],
        ts: npt.NDArray[np.int64],
        counted: npt.NDArray[np.bool_],
        timeout_ms: int | None,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Watermark before and after each source position of a segment, in arrival order.

        `parts`/`ts` are per position; `counted` is False where the event time is unknown
        (source failures), which then neither moves the watermark nor marks the partition
        active. Updates the partition maxima, activity and the combined watermark.
        """
        now = self.now_ms if self.now_ms is not None else 0
        n = len(ts)
        if n == 0:
            empty = np.empty(0, dtype=np.int64)
            return empty, empty
        seen = sorted(set(self.part_active) | set(np.unique(parts[counted]).tolist()))
        mins = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        any_active = np.zeros(n, dtype=bool)
        for part in seen:
            mine = counted & (parts == part)
            start = self.part_max.get(part, _NEVER)
            tops = np.maximum.accumulate(np.where(mine, ts, _NEVER))
            tops = np.maximum(tops, start)
            marks = np.where(tops == _NEVER, INITIAL_WATERMARK + 1, tops) - 1
            active = np.logical_or.accumulate(mine)
            if not self.idle(part, now, timeout_ms):
                active[:] = True
            mins = np.where(active, np.minimum(mins, marks), mins)
            any_active |= active
            if mine.any():
                self.part_max[part] = int(tops[-1])
                self.part_active[part] = now
        combined = np.where(any_active, np.maximum(mins, self.combined), self.combined)
        after = np.maximum.accumulate(combined)
        before = np.concatenate(([self.combined], after[:-1])).astype(np.int64)
        if after[-1] > self.combined:
            self.combined = int(after[-1])
            self.advanced = True
        return before, after
