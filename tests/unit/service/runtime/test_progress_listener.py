"""`service.runtime.progress_listener.JsonProgressListener`: what it hands the manager, and
that nothing it meets is raised into Spark's listener bus."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.runtime.progress_listener import JsonProgressListener


class JavaValue:
    """A py4j object's method that returns `value`."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self) -> Any:
        return self.value


class ProgressEvent:
    def __init__(self, text: str) -> None:
        self.progress = JavaValue(type("Progress", (), {"json": JavaValue(text)})())


class IdleEvent:
    def __init__(self, query_id: str, timestamp: str) -> None:
        self.id = JavaValue(type("Id", (), {"toString": JavaValue(query_id)})())
        self.timestamp = JavaValue(timestamp)


def test_progress_and_idle_reports_reach_the_callback() -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    listener = JsonProgressListener(lambda query_id, doc: seen.append((query_id, doc)))
    listener.onQueryProgress(ProgressEvent(json.dumps({"id": "q1", "batchId": 4})))
    listener.onQueryIdle(IdleEvent("q1", "2026-11-29T12:00:00.000Z"))
    assert seen == [
        ("q1", {"id": "q1", "batchId": 4}),
        ("q1", {"idle": True, "timestamp": "2026-11-29T12:00:00.000Z"}),
    ]


def test_a_failure_is_logged_and_never_raised_into_the_bus(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(query_id: str, doc: dict[str, Any]) -> None:
        raise RuntimeError("the manager is gone")

    listener = JsonProgressListener(broken)
    listener.onQueryProgress(ProgressEvent("not json"))
    listener.onQueryProgress(ProgressEvent("{}"))
    listener.onQueryIdle(IdleEvent("q1", "t"))
    assert [r.message for r in caplog.records] == [
        "progress listener failed",
        "progress listener failed",
        "idle listener failed",
    ]
