"""The window operator's processing-time timeouts, on real Spark (`spark.compile._timers`).

A new checkpoint's window query has them only when a wall-clock rule needs them: with them,
Spark calls the operator's function a second time in every micro-batch, for timed-out state.
Spark keeps a timeout column in the operator's state only with timeouts, so a checkpoint
keeps the choice it started with (`service.runtime.window_pins`); these tests check both
halves: the plans compiled for each case, and that a checkpoint resumed with its recorded
choice carries its open window across the restart while one resumed with the other is
refused by Spark.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException

from pipeline_stages import parse_pipeline
from pipeline_stages._base import PipelineInvalid, ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import CompiledPipeline, compile_pipeline
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._stream.context import CompileContext
from tests.integration.recorded_query import start_recorded_query

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def pipeline(times: list[int], **window: Any) -> list[dict[str, Any]]:
    """A `documents` source (event times in seconds of 2024-01-01) into a 10 s tumbling count."""
    docs = [{"k": "a", "t": f"2024-01-01T00:00:{t:02d}Z"} for t in times]
    return [
        {"$source": {"documents": docs, "timeField": {"$toDate": "$t"}}},
        {
            "$tumblingWindow": {
                "interval": {"size": 10, "unit": "second"},
                "allowedLateness": 0,
                "pipeline": [{"$group": {"_id": "$k", "n": {"$count": {}}}}],
                **window,
            }
        },
    ]


def compiled(spark: Any, stages: list[dict[str, Any]], timers: bool | None) -> CompiledPipeline:
    register_all(spark)
    ctx = CompileContext(
        spark=spark, processor_name="p", problems=ProblemCollector(), window_timers=timers
    )
    return compile_pipeline(parse_pipeline(stages), ctx)


def timeout_mode(run: CompiledPipeline) -> str:
    """The `GroupStateTimeout` of the operator in the query's analysed plan."""
    plan = run.envelopes._jdf.queryExecution().analyzed().toString()
    modes = {m for m in ("NoTimeout", "ProcessingTimeTimeout") if m in plan}
    assert len(modes) == 1, plan
    return modes.pop()


class Results:
    """The window results of every micro-batch."""

    def __init__(self) -> None:
        self.windows: list[tuple[str, int]] = []

    def write(self, batch: BatchResult) -> None:
        for output in batch.outputs:
            doc = json.loads(output.doc_json)
            self.windows.append((doc["_id"], doc["n"]))


def run(spark: Any, pipeline_run: CompiledPipeline, checkpoint: Path) -> list[tuple[str, int]]:
    """Run `pipeline_run` on `checkpoint` until its source is read; its window results."""
    results = Results()
    query, sink = start_recorded_query(
        spark, pipeline_run, results, name=f"timers_{uuid.uuid4().hex[:8]}", checkpoint=checkpoint
    )
    try:
        query.processAllAvailable()
        error = query.exception()
    finally:
        query.stop()
        sink.close()
    if error is not None:
        raise RuntimeError(str(error))
    return results.windows


def test_a_new_window_has_timeouts_only_when_a_wall_clock_rule_needs_them(spark: Any) -> None:
    plain = compiled(spark, pipeline([1]), None)
    assert (plain.window_timers, timeout_mode(plain)) == (False, "NoTimeout")
    idle = compiled(spark, pipeline([1], idleTimeout={"size": 5, "unit": "second"}), None)
    assert (idle.window_timers, timeout_mode(idle)) == (True, "ProcessingTimeTimeout")
    every = {"early": {"every": {"size": 1, "unit": "second"}}}
    assert compiled(spark, pipeline([1], trigger=every), None).window_timers is True
    # A checkpoint that started with them keeps them, needed or not.
    kept = compiled(spark, pipeline([1]), True)
    assert (kept.window_timers, timeout_mode(kept)) == (True, "ProcessingTimeTimeout")


def test_a_checkpoint_without_timeouts_refuses_a_wall_clock_rule(spark: Any) -> None:
    with pytest.raises(PipelineInvalid) as caught:
        compiled(spark, pipeline([1], idleTimeout={"size": 5, "unit": "second"}), False)
    [problem] = caught.value.problems
    assert problem.path == "/pipeline/1/$tumblingWindow"
    assert "resumeFromCheckpoint: false" in problem.message


@pytest.mark.parametrize("timers", [False, True])
def test_a_checkpoint_resumed_with_its_timeouts_carries_its_open_window(
    spark: Any, tmp_path: Path, timers: bool
) -> None:
    checkpoint = tmp_path / "checkpoint"
    assert run(spark, compiled(spark, pipeline([1, 4]), timers), checkpoint) == []
    # Restarted with more documents: the source resumes after the first two.
    after = run(spark, compiled(spark, pipeline([1, 4, 8, 12]), timers), checkpoint)
    assert after == [("a", 3)]


def test_spark_refuses_a_checkpoint_resumed_with_the_other_timeouts(
    spark: Any, tmp_path: Path
) -> None:
    """Why the choice is recorded: the state's schema changes with it."""
    checkpoint = tmp_path / "checkpoint"
    assert run(spark, compiled(spark, pipeline([1, 4]), False), checkpoint) == []
    with pytest.raises(StreamingQueryException, match="STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE"):
        run(spark, compiled(spark, pipeline([1, 4, 8, 12]), True), checkpoint)
