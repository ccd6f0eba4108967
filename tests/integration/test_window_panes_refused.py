"""The window engines fire the pane fields (issue 25): EARLY and LATE panes (`count` or
processing-time `every`) and the ON_TIME pane of tumbling, hopping, session and sliding
event-time windows, EARLY and ON_TIME of processing-time ones, in every accumulation mode, on
the operator engine. Compile refuses everything else at its path
(`unsupported_option`) instead of running the window without the panes its user asked for."""

from __future__ import annotations

from typing import Any

import pytest

from pipeline_stages import PipelineInvalid, parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.context import CompileContext

pytestmark = pytest.mark.spark

SOURCE = {"$source": {"documents": [{"k": 1}], "timeField": {"$toDate": 0}}}
GROUP = {"$group": {"_id": "$k", "n": {"$count": {}}}}
SECOND = {"size": 1, "unit": "second"}
FIXED: dict[str, dict[str, Any]] = {
    "$tumblingWindow": {"interval": SECOND, "pipeline": [GROUP]},
    "$hoppingWindow": {"interval": SECOND, "hopSize": SECOND, "pipeline": [GROUP]},
}
KEYED: dict[str, dict[str, Any]] = {
    "$sessionWindow": {"partitionBy": "$k", "gap": SECOND, "pipeline": [GROUP]},
    "$slidingWindow": {"timeDifference": SECOND, "pipeline": [GROUP]},
}
EARLY = {"early": {"count": 2}}


def _context(spark: Any, engine: str | None = None) -> CompileContext:
    register_all(spark)
    return CompileContext(
        spark=spark,
        processor_name="p",
        problems=ProblemCollector(),
        has_dlq=True,
        window_engine=engine,
    )


def _compile_problems(
    spark: Any, stage: dict[str, Any], engine: str | None = None
) -> list[tuple[str, str]]:
    with pytest.raises(PipelineInvalid) as info:
        compile_pipeline(parse_pipeline([SOURCE, stage]), _context(spark, engine))
    return [(p.code, p.path) for p in info.value.problems]


@pytest.mark.parametrize("mode", [None, "accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize(
    "trigger",
    [
        EARLY,
        {},
        {"early": {"count": 1}, "onlyUpdatedPanes": False},
        {"late": {"count": 1}},
        {**EARLY, "late": {"count": 3}},
        {**EARLY, "onlyUpdatedPanes": True},
        {"early": {"every": SECOND}},
        {"late": {"every": SECOND}},
        {**EARLY, "late": {"every": SECOND}},
        {"early": {"every": SECOND}, "late": {"count": 1}, "onlyUpdatedPanes": True},
    ],
)
@pytest.mark.parametrize("key", list(FIXED))
def test_panes_of_fixed_windows_compile(
    spark: Any, key: str, trigger: dict[str, Any], mode: str | None
) -> None:
    body = {**FIXED[key], "trigger": trigger, "allowedLateness": SECOND}
    if mode is not None:
        body["accumulationMode"] = mode
    compiled = compile_pipeline(parse_pipeline([SOURCE, {key: body}]), _context(spark))
    assert compiled.has_window


@pytest.mark.parametrize(
    ("trigger", "on_clock"), [(EARLY, False), ({"early": {"every": SECOND}}, True)]
)
@pytest.mark.parametrize("key", list(FIXED))
def test_early_panes_of_processing_time_windows_compile(
    spark: Any, key: str, trigger: dict[str, Any], on_clock: bool
) -> None:
    """Processing-time windows fire EARLY panes (no `late`: nothing is late by the wall
    clock; the parser refuses it) and the ON_TIME pane when the clock passes their end."""
    body = {**FIXED[key], "trigger": trigger, "boundary": "processingTime"}
    compiled = compile_pipeline(parse_pipeline([SOURCE, {key: body}]), _context(spark))
    assert compiled.has_window and compiled.closes_on_clock
    assert compiled.fires_panes_on_clock is on_clock


@pytest.mark.parametrize("trigger", [EARLY, {"early": {"every": SECOND}}])
@pytest.mark.parametrize("key", list(FIXED))
def test_the_batch_engine_refuses_panes(spark: Any, key: str, trigger: dict[str, Any]) -> None:
    body = {**FIXED[key], "trigger": trigger}
    assert _compile_problems(spark, {key: body}, engine="batch") == [
        ("unsupported_option", f"/pipeline/1/{key}/trigger")
    ]


@pytest.mark.parametrize(
    ("trigger", "on_clock"),
    [(EARLY, False), ({"early": {"every": SECOND}, "late": {"count": 1}}, True)],
)
def test_panes_of_sliding_windows_compile(
    spark: Any, trigger: dict[str, Any], on_clock: bool
) -> None:
    key = "$slidingWindow"
    body = {**KEYED[key], "trigger": trigger, "accumulationMode": "discarding", "grace": SECOND}
    compiled = compile_pipeline(parse_pipeline([SOURCE, {key: body}]), _context(spark))
    assert compiled.has_window
    assert compiled.fires_panes_on_clock is on_clock


@pytest.mark.parametrize("mode", [None, "accumulating", "discarding", "accumulatingAndRetracting"])
@pytest.mark.parametrize("trigger", [EARLY, {}, {**EARLY, "onlyUpdatedPanes": True}])
def test_count_panes_of_session_windows_compile(
    spark: Any, trigger: dict[str, Any], mode: str | None
) -> None:
    body = {**KEYED["$sessionWindow"], "trigger": trigger}
    if mode is not None:
        body["accumulationMode"] = mode
    compiled = compile_pipeline(parse_pipeline([SOURCE, {"$sessionWindow": body}]), _context(spark))
    assert compiled.has_window


@pytest.mark.parametrize(
    ("trigger", "on_clock"),
    [
        ({"early": {"every": SECOND}}, True),
        ({**EARLY, "late": {"count": 1}}, False),
        ({**EARLY, "late": {"every": SECOND}}, True),
    ],
)
def test_late_and_every_panes_of_session_windows_compile(
    spark: Any, trigger: dict[str, Any], on_clock: bool
) -> None:
    """`every` makes the processor wake on the wall clock (and `sluice process` wait for the
    pane), as it does for fixed windows."""
    body = {**KEYED["$sessionWindow"], "trigger": trigger, "allowedLateness": SECOND}
    compiled = compile_pipeline(parse_pipeline([SOURCE, {"$sessionWindow": body}]), _context(spark))
    assert compiled.has_window
    assert compiled.fires_panes_on_clock is on_clock


@pytest.mark.parametrize("pipeline", [[GROUP], [GROUP, {"$match": {"n": {"$gt": 1}}}]])
def test_the_batch_engine_refuses_session_panes(spark: Any, pipeline: list[Any]) -> None:
    body = {**KEYED["$sessionWindow"], "trigger": EARLY, "pipeline": pipeline}
    assert _compile_problems(spark, {"$sessionWindow": body}, engine="batch") == [
        ("unsupported_option", "/pipeline/1/$sessionWindow/trigger")
    ]


def test_a_match_after_the_group_compiles_into_the_operator_with_a_trigger(spark: Any) -> None:
    """With `trigger`, a `$match` right after the window's `$group` runs in the operator (which
    then knows that a pane it empties is not fired), whatever the window kind."""
    for key, window in {**FIXED, "$sessionWindow": KEYED["$sessionWindow"]}.items():
        pipeline = [GROUP, {"$match": {"$or": [{"n": {"$gte": 2}}, {"_id": None}]}}]
        body = {**window, "trigger": EARLY, "pipeline": pipeline}
        compiled = compile_pipeline(parse_pipeline([SOURCE, {key: body}]), _context(spark))
        assert compiled.has_window, key


@pytest.mark.parametrize(
    ("pipeline", "loc"),
    [
        # The operator does not evaluate every query operator: that one stays refused.
        ([GROUP, {"$match": {"_id": {"$regex": "^a"}}}], "pipeline/1/$match"),
        ([GROUP, {"$match": {"$expr": {"$gt": ["$n", 1]}}}], "pipeline/1/$match"),
        # After a stage that reshapes the results, it would run in Spark after the operator.
        ([GROUP, {"$set": {"m": "$n"}}, {"$match": {"m": 2}}], "pipeline/2/$match"),
        ([GROUP, {"$unwind": "$n"}], "pipeline/1/$unwind"),
    ],
)
def test_a_stage_after_the_group_that_may_empty_a_pane_is_refused(
    spark: Any, pipeline: list[dict[str, Any]], loc: str
) -> None:
    body = {**KEYED["$sessionWindow"], "trigger": EARLY, "pipeline": pipeline}
    assert _compile_problems(spark, {"$sessionWindow": body}) == [
        ("unsupported_option", f"/pipeline/1/$sessionWindow/{loc}")
    ]


def test_a_global_window_compiles_with_and_without_a_group(spark: Any) -> None:
    body = {"trigger": {"early": {"count": 2}}, "pipeline": [GROUP]}
    compiled = compile_pipeline(parse_pipeline([SOURCE, {"$globalWindow": body}]), _context(spark))
    assert compiled.has_window and not compiled.closes_on_clock
    # Without a $group the window keeps documents (the parser asks for discarding or
    # allowUnboundedState): they are exploded into the one window, with no start or end.
    keeps = {**body, "accumulationMode": "discarding", "pipeline": [{"$project": {"v": 1}}]}
    compiled = compile_pipeline(parse_pipeline([SOURCE, {"$globalWindow": keeps}]), _context(spark))
    assert compiled.has_window
    # The batch window engine fires no panes.
    assert _compile_problems(spark, {"$globalWindow": body}, engine="batch") == [
        ("unsupported_option", "/pipeline/1/$globalWindow/trigger")
    ]


@pytest.mark.parametrize("key", [*FIXED, *KEYED])
def test_windows_without_the_fields_still_compile(spark: Any, key: str) -> None:
    windows = {**FIXED, **KEYED}
    compiled = compile_pipeline(parse_pipeline([SOURCE, {key: windows[key]}]), _context(spark))
    assert compiled.has_window
