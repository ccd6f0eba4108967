"""Where librdkafka's own log lines go: the `sluice.kafka.client` logger, rate-limited.

librdkafka writes to stderr by default, and against a wrong address it reports every
reconnect to every broker (a refused connection every 100 ms to 10 s, in each consumer and
producer, on the driver and in every task): thousands of identical lines in the service log
before the processor fails. The Kafka source and sink hand their clients this logger
instead. It passes each distinct message (digits ignored, so "after 3ms" and "after 9ms" are
the same message) at most once per `INTERVAL_S`, and says how many it held back when it
passes that message again.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from typing import Final

LOGGER_NAME: Final = "sluice.kafka.client"
#: Seconds between two passes of the same message.
INTERVAL_S: Final = 60.0

_DIGITS: Final = re.compile(r"\d+")


class RepeatFilter(logging.Filter):
    """Passes a message (digits ignored) at most once per `interval_s` seconds."""

    def __init__(
        self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._clock = clock
        self._lock = threading.Lock()
        #: message shape -> (when it last passed, how many were held back since)
        self._seen: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether `record` passes; a passing repeat says how many were held back."""
        shape = _DIGITS.sub("#", record.getMessage())
        now = self._clock()
        with self._lock:
            last = self._seen.get(shape)
            if last is not None and now - last[0] < self.interval_s:
                self._seen[shape] = (last[0], last[1] + 1)
                return False
            held = 0 if last is None else last[1]
            self._seen[shape] = (now, 0)
        if held:
            record.msg = (
                f"{record.getMessage()} ({held} more like it in the last {self.interval_s:g} s)"
            )
            record.args = None
        return True


def client_logger() -> logging.Logger:
    """The logger to pass to confluent-kafka clients (`logger=`), set up once per process."""
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(f, RepeatFilter) for f in logger.filters):
        logger.addFilter(RepeatFilter())
    return logger
