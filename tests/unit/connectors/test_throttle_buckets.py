"""`$throttle`'s token buckets and the reader wrapper, on an injected clock (no sleeping)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline_stages._connectors.sources.documents import DocumentsStreamReader
from pipeline_stages._connectors.sources.rate_limit import Limit, RateLimit, TokenBucket
from pipeline_stages._connectors.sources.throttled import (
    OFFSET_KEY,
    ThrottledStreamReader,
    decode_limits,
    encode_limits,
    strip,
    throttle_figures,
)


class FakeClock:
    """Monotonic seconds moved by hand; `sleep` advances it (and records the waits)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


# ---------------------------------------------------------------------- the bucket


def test_bucket_starts_full_and_refills_at_its_rate_up_to_one_second() -> None:
    bucket = TokenBucket(10, now=0.0)
    assert bucket.available(0.0) == 10
    bucket.take(10, 0.0)
    assert bucket.available(0.0) == 0
    assert bucket.available(0.25) == pytest.approx(2.5)
    assert bucket.available(60.0) == 10  # never more than one second's worth


def test_bucket_wait_is_the_time_to_the_tokens_needed() -> None:
    bucket = TokenBucket(4, now=0.0)
    bucket.take(4, 0.0)
    assert bucket.wait_for(1, 0.0) == pytest.approx(0.25)
    assert bucket.wait_for(1, 0.25) == 0
    assert bucket.wait_for(100, 0.25) == pytest.approx(0.75)  # capped at the capacity


def test_bucket_debt_is_capped_at_one_second() -> None:
    bucket = TokenBucket(100, now=0.0)
    bucket.take(1_000_000, 0.0)  # one huge record
    assert bucket.available(0.0) == -100
    assert bucket.wait_for(1, 0.0) == pytest.approx(1.01)


def test_bucket_refuses_a_non_positive_rate() -> None:
    with pytest.raises(ValueError, match="positive rate"):
        TokenBucket(0, now=0.0)


def test_rate_limit_takes_the_tightest_of_every_limit() -> None:
    clock = FakeClock()
    rate = RateLimit([Limit(50, None), Limit(20, 1000)], clock)
    allowance = rate.allowance()
    assert (allowance.records, allowance.bytes) == (20, 1000)
    rate.charge(20, 600)
    assert rate.wait() == pytest.approx(1 / 20)  # the 20/s bucket is empty
    clock.now += 0.5
    allowance = rate.allowance()
    assert (allowance.records, allowance.bytes) == (10, 900)


def test_rate_limit_without_limits_never_waits() -> None:
    rate = RateLimit([], FakeClock())
    assert rate.wait() == 0
    assert (rate.allowance().records, rate.allowance().bytes) == (None, None)


def test_limits_travel_as_an_option_and_back() -> None:
    limits = [Limit(5, None), Limit(None, 300)]
    assert decode_limits(encode_limits(limits)) == limits


# ---------------------------------------------------------------------- the reader wrapper


def _documents(n: int, batch: int = 1000, pad: int = 0) -> DocumentsStreamReader:
    texts = [json.dumps({"i": i, "pad": "x" * pad}) for i in range(n)]
    return DocumentsStreamReader({"documents": json.dumps(texts), "batchsize": str(batch)})


def _drain(reader: ThrottledStreamReader, polls: int) -> list[dict[str, Any]]:
    """Plan up to `polls` micro-batches as Spark would; the end offsets of those that ran."""
    start = reader.initialOffset()
    ends = []
    for _ in range(polls):
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        if end != start:
            ends.append(end)
            reader.commit(end)
            start = end
    return ends


def test_every_batch_fits_the_bucket_and_every_record_is_read() -> None:
    clock = FakeClock()
    reader = ThrottledStreamReader(
        _documents(95), [Limit(messages_per_sec=10)], clock=clock, sleep=clock.sleep
    )
    ends = _drain(reader, polls=200)
    sizes = [e["index"] - s["index"] for s, e in zip([{"index": 0}, *ends], ends, strict=False)]
    assert sum(sizes) == 95
    assert max(sizes) <= 10
    # 95 records at 10/s from a full bucket of 10: 8.5 s of waiting at least.
    assert clock.now - 100.0 >= 8.5 - 1e-9
    assert all(s <= 1.0 for s in clock.sleeps)


def test_the_source_bound_still_applies_under_a_looser_throttle() -> None:
    clock = FakeClock()
    reader = ThrottledStreamReader(_documents(30, batch=4), [Limit(100)], clock=clock)
    ends = _drain(reader, polls=20)
    assert [e["index"] for e in ends] == [4, 8, 12, 16, 20, 24, 28, 30]
    # Not held back: the source's own bound cut the batches, and no wait happened.
    assert all(throttle_figures(e) == {"throttledTimeMs": 0, "throttleEvents": 0} for e in ends)


def test_figures_count_the_waits_and_cuts_before_each_batch() -> None:
    clock = FakeClock()
    reader = ThrottledStreamReader(_documents(25), [Limit(10)], clock=clock, sleep=clock.sleep)
    ends = _drain(reader, polls=50)
    figures = [throttle_figures(e) for e in ends]
    # The first batch takes the full bucket: cut from 25 to 10 without waiting.
    assert figures[0] == {"throttledTimeMs": 0, "throttleEvents": 1}
    assert all(f["throttleEvents"] == 1 for f in figures)
    waited = sum(f["throttledTimeMs"] for f in figures)
    # Every wait but the last held a batch back; the last found the source read out.
    assert waited == round(sum(clock.sleeps[:-1]) * 1000)
    assert waited > 0


def test_a_wait_that_finds_nothing_to_read_is_not_throttled_time() -> None:
    clock = FakeClock()
    reader = ThrottledStreamReader(_documents(10), [Limit(10)], clock=clock, sleep=clock.sleep)
    ends = _drain(reader, polls=5)  # all 10 in the first batch, then waits on an empty source
    assert [e["index"] for e in ends] == [10]
    assert clock.sleeps  # it did wait for the bucket
    end = ends[0]
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    assert reader._waited_s == 0 and not reader._held


def test_bytes_per_sec_cuts_a_batch_to_the_bytes_allowed() -> None:
    clock = FakeClock()
    inner = _documents(40, pad=80)
    size = len(inner.texts[0].encode())
    reader = ThrottledStreamReader(
        inner, [Limit(bytes_per_sec=size * 5)], clock=clock, sleep=clock.sleep
    )
    ends = _drain(reader, polls=200)
    starts = [{"index": 0}, *ends]
    sizes = [inner.bytes_between(s, e) for s, e in zip(starts, ends, strict=False)]
    assert ends[-1]["index"] == 40
    assert max(sizes) <= size * 5


def test_a_record_larger_than_bytes_per_sec_passes_alone_then_waits_a_second() -> None:
    clock = FakeClock()
    inner = _documents(3, pad=500)
    reader = ThrottledStreamReader(
        inner, [Limit(bytes_per_sec=100)], clock=clock, sleep=clock.sleep
    )
    first = reader.latestOffset({"index": 0}, ReadMaxRows(1000))
    assert first["index"] == 1
    # The bucket is a full second in debt: the next call waits its maximum and plans nothing.
    assert reader.latestOffset(first, ReadMaxRows(1000)) == first
    assert clock.sleeps == [1.0]


def test_offsets_reach_the_wrapped_reader_without_the_figures() -> None:
    calls: list[tuple[str, Any]] = []

    class Recording:
        def initialOffset(self) -> dict[str, Any]:
            return {"seq": 0}

        def getDefaultReadLimit(self) -> Any:
            return ReadMaxRows(100)

        def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
            calls.append(("latest", start))
            return {"seq": start["seq"] + min(3, limit.max_rows)}

        def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
            return int(end["seq"] - start["seq"])

        def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[Any]:
            calls.append(("partitions", (start, end)))
            return []

        def commit(self, end: dict[str, Any]) -> None:
            calls.append(("commit", end))

    reader = ThrottledStreamReader(Recording(), [Limit(100)], clock=FakeClock())
    end = reader.latestOffset({"seq": 0}, ReadMaxRows(100))
    assert OFFSET_KEY in end
    second = reader.latestOffset(end, ReadMaxRows(100))
    reader.partitions(end, second)
    reader.commit(second)
    for _, offset in calls:
        for each in offset if isinstance(offset, tuple) else (offset,):
            assert OFFSET_KEY not in each
    assert strip(second) == {"seq": 6}


def test_figures_of_an_offset_given_as_text() -> None:
    text = json.dumps({"index": 3, OFFSET_KEY: {"throttledTimeMs": 12, "throttleEvents": 1}})
    assert throttle_figures(text) == {"throttledTimeMs": 12, "throttleEvents": 1}
    assert throttle_figures({"index": 3}) == {}
    assert throttle_figures("not json") == {}


def test_file_reader_sizes_lines_without_their_newlines(tmp_path: Any) -> None:
    from pipeline_stages._connectors.sources.files import FileStreamReader

    (tmp_path / "001.jsonl").write_text('{"a": 1}\n{"bb": 22}', encoding="utf-8")  # no last \n
    (tmp_path / "002.jsonl").write_text('{"c": 333}\n\n{"d": 4}\n', encoding="utf-8")
    inner = FileStreamReader({"directory": str(tmp_path)})
    start = inner.initialOffset()
    end = inner.latestOffset(start, ReadAllAvailable())
    texts = ['{"a": 1}', '{"bb": 22}', '{"c": 333}', "", '{"d": 4}']
    assert inner.records_between(start, end) == 5
    assert inner.bytes_between(start, end) == sum(len(t) for t in texts)
    middle = inner.latestOffset(start, ReadMaxRows(3))
    assert inner.bytes_between(start, middle) == sum(len(t) for t in texts[:3])
    assert inner.bytes_between(middle, end) == sum(len(t) for t in texts[3:])
    clock = FakeClock()
    reader = ThrottledStreamReader(
        FileStreamReader({"directory": str(tmp_path)}),
        [Limit(bytes_per_sec=20)],
        clock=clock,
        sleep=clock.sleep,
    )
    ends = _drain(reader, polls=50)
    assert strip(ends[-1])["seq"] == 5
    starts = [start, *ends]
    assert all(
        inner.bytes_between(strip(s), strip(e)) <= 20
        or inner.records_between(strip(s), strip(e)) == 1
        for s, e in zip(starts, ends, strict=False)
    )
