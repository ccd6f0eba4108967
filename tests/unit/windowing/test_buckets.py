"""What lets P buckets give one bucket's results (`spark.compile._bucketed`): shadow flags
that keep a row's effect on the clock and the window set but nothing else, and result `sub`s
that keep windows in start order when the sink merges the buckets' envelopes.

The end-to-end checks (every conformance transcript at two buckets, random streams against the
reference model) are in `tests/conformance` and `tests/integration/test_window_operator.py`.
"""

from __future__ import annotations

from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.emit import Emitter

FLAGS = {name: value for name, value in vars(C).items() if name.startswith("FLAG_")}


def test_every_flag_but_the_shadow_only_one_has_a_shadow() -> None:
    assert set(C.SHADOW_FLAGS) | {C.FLAG_SOURCE_FAILED_ELSEWHERE} == set(FLAGS.values())


def test_a_shadow_does_to_the_clock_and_windows_what_its_row_does_and_nothing_else() -> None:
    failures = (C.FLAG_FAILED_BEFORE, C.FLAG_SOURCE_FAILED, C.FLAG_FAILED_INSIDE)
    for flag, shadow in C.SHADOW_FLAGS.items():
        assert (flag in C.ENTERED) == (shadow in C.ENTERED), flag  # creates the same windows
        assert (flag in C.UNCOUNTED) == (shadow in C.UNCOUNTED), flag  # same watermark
        assert shadow not in failures, flag  # its owner writes the DLQ record, not the shadow
        assert C.SHADOW_FLAGS.get(shadow, shadow) == shadow  # a shadow's shadow is itself
    assert C.SHADOW_FLAGS[C.FLAG_OK] != C.FLAG_OK  # nothing folds a shadow's content


def _close(out: Emitter, start: int, groups: int) -> None:
    out.begin_window()
    for n in range(groups):
        out.result(part=0, seq=7, start=start, end=start + 10, key=f"k{n}", doc="{}", meta="{}")


def test_windows_closed_at_one_record_stay_in_start_order_across_buckets() -> None:
    bucket_a, bucket_b = Emitter(C.WindowSource()), Emitter(C.WindowSource())
    for start, (groups_a, groups_b) in zip((0, 10, 20), ((3, 1), (0, 2), (1, 4)), strict=True):
        _close(bucket_a, start, groups_a)
        _close(bucket_b, start, groups_b)  # every bucket closes every window, empty or not
    merged = sorted(
        [*bucket_a.rows, *bucket_b.rows], key=lambda row: (row[2], row[1], row[3])
    )  # the sink's order: seq, part, sub
    starts = [row[10] for row in merged]
    assert starts == [0] * 4 + [10] * 2 + [20] * 5
    assert len({row[3] for row in bucket_a.rows}) == len(bucket_a.rows)  # no ties in a bucket
