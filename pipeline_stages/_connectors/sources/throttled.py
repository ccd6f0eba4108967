"""`$throttle` applied where a micro-batch is planned: a wrapper around a source's reader.

Spark asks a Python source's reader for the end of the next micro-batch (`latestOffset`) on
the driver before each batch. The wrapper keeps the pipeline's token buckets (`rate_limit`)
there: it waits (at most `MAX_WAIT_S` per call, so stopping the query stays prompt; Spark
asks again) until every bucket holds a token, then asks the wrapped reader for at most the
allowance's records, trims the batch to the allowance's bytes when `bytesPerSec` is set, and
spends what the batch reads. Nothing is dropped: the records not read yet stay in the source.

The wrapped reader must count the records between two of its offsets (`records_between`)
and, for `bytesPerSec`, size them (`bytes_between`); `$throttle` refuses `bytesPerSec` at
compile time on sources that cannot (`BYTE_SIZED_FORMATS`).

What the throttle did before a batch travels in the batch's end offset, under `OFFSET_KEY`:
`{"throttledTimeMs", "throttleEvents"}` of the waits and cuts that held that batch back. Spark
keeps offsets in its offset log before the batch runs, so a replayed batch reports the same
figures and the stats ledger replaces them instead of adding them again; the key is removed
before an offset reaches the wrapped reader. Throttled time counts the waits that ended in a
batch (a wait after which the source had nothing to read was not holding anything back).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.sources.rate_limit import (
    OFFSET_KEY,
    Clock,
    Limit,
    RateLimit,
    throttle_figures,
)
from pipeline_stages._stream.context import THROTTLE_OPTION

__all__ = ["OFFSET_KEY", "THROTTLE_OPTION", "ThrottledStreamReader", "strip", "throttle_figures"]

#: The longest a single `latestOffset` call waits for the buckets.
MAX_WAIT_S = 1.0


def encode_limits(limits: Sequence[Limit]) -> str:
    """The `THROTTLE_OPTION` value of some limits."""
    return json.dumps(
        [{"messagesPerSec": x.messages_per_sec, "bytesPerSec": x.bytes_per_sec} for x in limits]
    )


def decode_limits(text: str) -> list[Limit]:
    """The limits of a `THROTTLE_OPTION` value."""
    return [Limit(d.get("messagesPerSec"), d.get("bytesPerSec")) for d in json.loads(text)]


def strip(offset: dict[str, Any]) -> dict[str, Any]:
    """An offset as the wrapped reader wrote it (without the throttle's figures)."""
    return {k: v for k, v in offset.items() if k != OFFSET_KEY}


class ThrottledStreamReader(DataSourceStreamReader):
    """See the module docstring.

    Args:
        inner: The source's own reader.
        limits: Every `$throttle` stage's rates.
        clock: Monotonic seconds (tests pass their own).
        sleep: How to wait (tests pass their own).
    """

    def __init__(
        self,
        inner: Any,
        limits: Sequence[Limit],
        *,
        clock: Clock = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.inner = inner
        self.limits = list(limits)
        self._clock = clock
        self._sleep = sleep
        self._rate: RateLimit | None = None  # driver only: created at the first plan
        self._waited_s = 0.0
        self._held = False

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_rate": None}

    def _buckets(self) -> RateLimit:
        if self._rate is None:
            self._rate = RateLimit(self.limits, self._clock)
        return self._rate

    def initialOffset(self) -> dict[str, Any]:
        """The wrapped reader's."""
        return dict(self.inner.initialOffset())

    def getDefaultReadLimit(self) -> ReadLimit:
        """The wrapped reader's (the throttle cuts below it)."""
        limit: ReadLimit = self.inner.getDefaultReadLimit()
        return limit

    def reportLatestOffset(self) -> Any:
        """The wrapped reader's backlog report."""
        return self.inner.reportLatestOffset()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch's end within the buckets' allowance; `start` while they are empty."""
        rate = self._buckets()
        wait = rate.wait()
        if wait > 0:
            pause = min(wait, MAX_WAIT_S)
            self._sleep(pause)
            self._waited_s += pause
            self._held = True
            if rate.wait() > 0:
                return start
        base = strip(start)
        allowance = rate.allowance()
        ceiling = None if isinstance(limit, ReadAllAvailable) else _max_rows(limit)
        rows = allowance.records
        if rows is not None and ceiling is not None:
            rows = min(rows, ceiling)
        end = dict(self.inner.latestOffset(base, limit if rows is None else ReadMaxRows(rows)))
        if end == base:
            self._waited_s, self._held = 0.0, False
            return start
        count = int(self.inner.records_between(base, end))
        size = 0
        if allowance.bytes is not None:
            end, count, size = self._within_bytes(base, end, count, allowance.bytes)
        if rows is not None and count >= rows and (ceiling is None or rows < ceiling):
            self._held = True  # the bucket, not the source or its own bound, cut the batch
        rate.charge(count, size)
        figures = {
            "throttledTimeMs": round(self._waited_s * 1000),
            "throttleEvents": 1 if self._held else 0,
        }
        self._waited_s, self._held = 0.0, False
        return {**end, OFFSET_KEY: figures}

    def _within_bytes(
        self, base: dict[str, Any], end: dict[str, Any], count: int, allowed: int
    ) -> tuple[dict[str, Any], int, int]:
        """The longest prefix of the batch within `allowed` bytes (its first record always)."""
        size = int(self.inner.bytes_between(base, end))
        if size <= allowed or count <= 1:
            return end, count, size
        self._held = True
        low, high = 1, count - 1  # the largest prefix that fits is in [low, high] (or is 1)
        best = dict(self.inner.latestOffset(base, ReadMaxRows(1)))
        while low <= high:
            middle = (low + high) // 2
            candidate = dict(self.inner.latestOffset(base, ReadMaxRows(middle)))
            if int(self.inner.bytes_between(base, candidate)) <= allowed:
                best, low = candidate, middle + 1
            else:
                high = middle - 1
        return (
            best,
            int(self.inner.records_between(base, best)),
            int(self.inner.bytes_between(base, best)),
        )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """The wrapped reader's partitions of the batch."""
        found: Sequence[InputPartition] = self.inner.partitions(strip(start), strip(end))
        return found

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The wrapped reader's rows (on the executors)."""
        rows: Iterator[Any] = self.inner.read(partition)
        return rows

    def commit(self, end: dict[str, Any]) -> None:
        """The wrapped reader's commit."""
        self.inner.commit(strip(end))

    def stop(self) -> None:
        """The wrapped reader's stop."""
        self.inner.stop()


def _max_rows(limit: ReadLimit) -> int | None:
    return int(limit.max_rows) if isinstance(limit, ReadMaxRows) else None
