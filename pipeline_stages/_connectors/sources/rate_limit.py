"""`$throttle`'s token buckets, in plain Python (no Spark): what the next micro-batch may read.

Each configured limit (`messagesPerSec`, `bytesPerSec`, of every `$throttle` stage) is a
bucket holding at most one second's worth of its rate, refilled continuously. A micro-batch
may start only when every bucket holds at least one token (Atlas: a message passes only when
every limit has capacity; the stage then waits as long as the most exhausted limit needs, all
limits refilling meanwhile). It may read at most the whole-message tokens of every messages
bucket and the bytes of every bytes bucket, except that its first record always passes once
it may start, however large: a record larger than a bytes limit puts that bucket in debt, at
most one second's worth, so the stage then waits up to a second (Atlas: "passes the document
... then waits one second before passing more data").

The clock is injected (monotonic seconds), so tests drive it by hand.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

#: A monotonic clock, in seconds.
Clock = Callable[[], float]
#: The key of the throttle's figures in a micro-batch's end offset (`throttled`; the `$`
#: keeps it apart from Kafka topic names).
OFFSET_KEY = "$throttle"
#: Token shortfalls below this are floating-point rounding, not a reason to wait.
_DUST = 1e-6


class TokenBucket:
    """Tokens refilled at `rate` per second up to `rate` (one second's burst); may go into
    debt down to `-rate` when a batch takes more than it holds.

    Args:
        rate: Tokens per second (and the capacity), > 0.
        now: The clock reading the bucket starts at (full).
    """

    def __init__(self, rate: float, now: float) -> None:
        if rate <= 0:
            raise ValueError(f"a token bucket needs a positive rate, got {rate!r}")
        self.rate = float(rate)
        self.tokens = float(rate)
        self._stamp = now

    def _refill(self, now: float) -> None:
        elapsed = max(0.0, now - self._stamp)
        self.tokens = min(self.rate, self.tokens + elapsed * self.rate)
        self._stamp = max(self._stamp, now)

    def available(self, now: float) -> float:
        """The tokens held at `now` (negative while in debt)."""
        self._refill(now)
        return self.tokens

    def wait_for(self, need: float, now: float) -> float:
        """Seconds from `now` until the bucket holds `need` tokens (0 when it does)."""
        self._refill(now)
        shortfall = min(need, self.rate) - self.tokens
        # A wait computed from a shortfall comes back with rounding dust: that is no wait.
        return shortfall / self.rate if shortfall > _DUST else 0.0

    def take(self, amount: float, now: float) -> None:
        """Spend `amount` tokens (the debt is capped at one second's worth)."""
        self._refill(now)
        self.tokens = max(self.tokens - amount, -self.rate)


@dataclass(frozen=True)
class Limit:
    """One `$throttle` stage's rates (None: not limited on that measure)."""

    messages_per_sec: int | None = None
    bytes_per_sec: int | None = None


@dataclass(frozen=True)
class Allowance:
    """What the next micro-batch may read: records and bytes at most (None: unbounded)."""

    records: int | None
    bytes: int | None


class RateLimit:
    """The buckets of every `$throttle` of a pipeline (see the module docstring).

    Args:
        limits: Each `$throttle` stage's rates.
        clock: Monotonic seconds (default `time.monotonic`).
    """

    def __init__(self, limits: Iterable[Limit], clock: Clock = time.monotonic) -> None:
        self.clock = clock
        now = clock()
        limits = list(limits)
        self.messages = [TokenBucket(x.messages_per_sec, now) for x in limits if x.messages_per_sec]
        self.bytes = [TokenBucket(x.bytes_per_sec, now) for x in limits if x.bytes_per_sec]

    @property
    def limits_bytes(self) -> bool:
        """Whether any `bytesPerSec` is set (the source must then size its records)."""
        return bool(self.bytes)

    def wait(self) -> float:
        """Seconds until a micro-batch may start: every bucket holds a token."""
        now = self.clock()
        return max((b.wait_for(1.0, now) for b in [*self.messages, *self.bytes]), default=0.0)

    def allowance(self) -> Allowance:
        """The records and bytes the next micro-batch may read now (at least one record
        once `wait()` is 0)."""
        now = self.clock()
        records = min((math.floor(b.available(now)) for b in self.messages), default=None)
        size = min((math.floor(b.available(now)) for b in self.bytes), default=None)
        return Allowance(
            records=None if records is None else max(1, records),
            bytes=None if size is None else max(1, size),
        )

    def charge(self, records: int, size: int) -> None:
        """Spend what a planned micro-batch reads."""
        now = self.clock()
        for bucket in self.messages:
            bucket.take(records, now)
        for bucket in self.bytes:
            bucket.take(size, now)


def throttle_figures(offset: Any) -> dict[str, int]:
    """`{"throttledTimeMs", "throttleEvents"}` an end offset (dict or JSON text) carries."""
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return {}
    found = offset.get(OFFSET_KEY) if isinstance(offset, dict) else None
    if not isinstance(found, dict):
        return {}
    return {k: int(found.get(k, 0) or 0) for k in ("throttledTimeMs", "throttleEvents")}
