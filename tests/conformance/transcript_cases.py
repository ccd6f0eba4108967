"""Which executors run the conformance transcripts, and the test cases of each.

Registering another executor is one entry here and one small test file beside
`test_transcripts.py`: each Spark executor's transcripts are a file of their own
(`test_transcripts_spark*.py`), because the test run hands out whole files to its workers
and the three Spark executors' transcripts together took ~25 minutes on one of them.

A transcript's `"notimpl": {"spark": "why"}` declares an expected gap of one executor (strict
xfail, never a silent skip); `"xfail"` marks a transcript that must fail under every executor
(it tests the harness itself).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.harness import Transcript, TranscriptMismatch, load_transcripts
from tests.conformance.reference_model import WINDOW_STAGES, ReferenceExecutor
from tests.conformance.spark_executor import (
    SparkBatchExecutor,
    SparkExecutor,
    SparkParallelExecutor,
)

#: Executors that run the transcripts and the Hypothesis properties.
EXECUTORS: list[Any] = [
    pytest.param(ReferenceExecutor, id="reference"),
]
#: Spark executors run each transcript as a streaming query: `slow`, so that the suite starts
#: their files first (tests/conftest.py orders by it).
SPARK_MARKS = [pytest.mark.spark, pytest.mark.slow]
#: Executors that run the transcripts but not the Hypothesis properties, which cost one Spark
#: micro-batch (~0.5 s) per step; tests/integration/test_window_properties.py covers them.
SPARK = pytest.param(SparkExecutor, id="spark", marks=SPARK_MARKS)
SPARK_BATCH = pytest.param(SparkBatchExecutor, id="spark-batch", marks=SPARK_MARKS)
SPARK_PARALLEL = pytest.param(SparkParallelExecutor, id="spark-parallel", marks=SPARK_MARKS)


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


def cases(executor: Any) -> list[Any]:
    """One test case per transcript the executor (a `pytest.param`) runs, with its xfails."""
    return list(_cases(executor))


def _cases(executor: Any) -> Iterator[Any]:
    for transcript in load_transcripts():
        if executor.id == "spark-batch" and not runs_on_batch_engine(transcript):
            continue
        marks = list(executor.marks)
        reason = transcript.xfail or transcript.notimpl.get(str(executor.id))
        if reason:
            marks.append(pytest.mark.xfail(strict=True, raises=TranscriptMismatch, reason=reason))
        yield pytest.param(
            executor.values[0], transcript, id=f"{executor.id}-{transcript.name}", marks=marks
        )
