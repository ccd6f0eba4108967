"""Runs every conformance transcript through every registered executor.

Registering the Spark window operator later is one line in `EXECUTORS`, e.g.
`pytest.param(SparkExecutor, id="spark", marks=SPARK_MARKS)` (`spark` and `slow`). A transcript's
`"notimpl": {"spark": "why"}` declares an expected gap of one executor (strict xfail, never a
silent skip); `"xfail"` marks a transcript that must fail under every executor (it tests the
harness itself).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.conformance.harness import (
    Executor,
    Transcript,
    TranscriptMismatch,
    load_transcripts,
    run_transcript,
)
from tests.conformance.reference_model import WINDOW_STAGES, ReferenceExecutor
from tests.conformance.spark_executor import (
    SparkBatchExecutor,
    SparkExecutor,
    SparkParallelExecutor,
)

EXECUTORS: list[Any] = [
    pytest.param(ReferenceExecutor, id="reference"),
]
#: The Spark executors' transcripts are ~250 micro-batch runs, ~25 minutes on one worker:
#: `slow`, so that the suite starts this file first (tests/conftest.py orders by it).
SPARK_MARKS = [pytest.mark.spark, pytest.mark.slow]
#: Executors that run the transcripts but not the Hypothesis properties, which cost one Spark
#: micro-batch (~0.5 s) per step; tests/integration/test_window_properties.py covers them.
TRANSCRIPT_EXECUTORS: list[Any] = [
    *EXECUTORS,
    pytest.param(SparkExecutor, id="spark", marks=SPARK_MARKS),
    pytest.param(SparkBatchExecutor, id="spark-batch", marks=SPARK_MARKS),
    pytest.param(SparkParallelExecutor, id="spark-parallel", marks=SPARK_MARKS),
]


def _on_clock(body: dict[str, Any]) -> bool:
    """Whether a window body has a wall-clock rule: an idle timeout, processing-time
    boundaries, or a processing-time (`every`) trigger."""
    trigger = body.get("trigger") or {}
    every = any("every" in (trigger.get(name) or {}) for name in ("early", "late"))
    return every or "idleTimeout" in body or body.get("boundary") == "processingTime"


def runs_on_batch_engine(transcript: Transcript) -> bool:
    """Whether the batch window engine runs the transcript's pipeline: no wall-clock rule
    (`batch.engine.ineligible`; `SparkBatchExecutor` fails when the planner disagrees, so
    this cannot silently test the operator instead)."""
    source, *stages = transcript.pipeline
    if "partitionIdleTimeout" in source["$source"]:
        return False
    bodies = [body for stage in stages for key, body in stage.items() if key in WINDOW_STAGES]
    return bool(bodies) and not any(_on_clock(body) for body in bodies)


def _executor_name(param: Any) -> str:
    return str(param.id)


def _cases() -> Iterator[Any]:
    for executor in TRANSCRIPT_EXECUTORS:
        for transcript in load_transcripts():
            if executor.id == "spark-batch" and not runs_on_batch_engine(transcript):
                continue
            marks = list(executor.marks)
            reason = transcript.xfail or transcript.notimpl.get(_executor_name(executor))
            if reason:
                marks.append(
                    pytest.mark.xfail(strict=True, raises=TranscriptMismatch, reason=reason)
                )
            yield pytest.param(
                executor.values[0], transcript, id=f"{executor.id}-{transcript.name}", marks=marks
            )


@pytest.mark.parametrize(("make_executor", "transcript"), list(_cases()))
def test_transcript(make_executor: Callable[[], Executor], transcript: Transcript) -> None:
    run_transcript(make_executor(), transcript)


def test_transcript_names_are_unique_and_match_files() -> None:
    transcripts = load_transcripts()
    names = [t.name for t in transcripts]
    assert len(names) == len(set(names))
    assert all(t.path is not None and t.path.stem == t.name for t in transcripts)


def test_some_transcripts_must_fail() -> None:
    assert any(t.xfail for t in load_transcripts())
