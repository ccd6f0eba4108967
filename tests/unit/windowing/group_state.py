"""A stand-in for PySpark's `GroupState`: what the window operator uses of it."""

from __future__ import annotations


class FakeState:
    """What the operator uses of PySpark's `GroupState`, recording the timeout it sets."""

    def __init__(self, blob: bytes | None, now_ms: int) -> None:
        self.blob = blob
        self.now_ms = now_ms
        self.timeout_ms: int | None = None

    @property
    def exists(self) -> bool:
        return self.blob is not None

    @property
    def get(self) -> tuple[bytes]:
        assert self.blob is not None
        return (self.blob,)

    def update(self, value: tuple[bytes]) -> None:
        self.blob = value[0]

    def getCurrentProcessingTimeMs(self) -> int:  # noqa: N802 - PySpark's name
        return self.now_ms

    def setTimeoutDuration(self, duration_ms: int) -> None:  # noqa: N802 - PySpark's name
        assert duration_ms > 0
        self.timeout_ms = duration_ms
