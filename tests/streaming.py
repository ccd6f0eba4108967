"""Waiting on a running streaming query in tests: on the query itself, never a bare sleep.

Micro-batches run on Spark's schedule; a test states the condition it needs (an end offset,
a batch id, a count) and waits for it with `StreamingQuery.awaitTermination(timeout)`, which
returns at once if the query dies, so a failure surfaces as the query's error rather than
as a timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: How long one wait on the query lasts before the condition is checked again.
CHECK_EVERY_S = 0.05


def wait_until(query: Any, done: Callable[[], bool], what: str, timeout_s: float) -> None:
    """Return once `done()`; fail on a query error or after `timeout_s` (naming `what`)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        error = query.exception()
        if error is not None:
            raise AssertionError(f"query failed while waiting for {what}: {error}")
        if not query.isActive:
            raise AssertionError(f"query stopped while waiting for {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last: {query.lastProgress}")
        query.awaitTermination(CHECK_EVERY_S)
