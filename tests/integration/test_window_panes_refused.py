"""Until the window engines fire panes (issue 25), compile refuses the pane fields at their
paths (`unsupported_option`) instead of running the window without them."""

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
WINDOWS: dict[str, dict[str, Any]] = {
    "$tumblingWindow": {"interval": SECOND, "pipeline": [GROUP]},
    "$hoppingWindow": {"interval": SECOND, "hopSize": SECOND, "pipeline": [GROUP]},
    "$sessionWindow": {"partitionBy": "$k", "gap": SECOND, "pipeline": [GROUP]},
    "$slidingWindow": {"timeDifference": SECOND, "pipeline": [GROUP]},
}


def _compile_problems(spark: Any, stage: dict[str, Any]) -> list[tuple[str, str]]:
    register_all(spark)
    ctx = CompileContext(spark=spark, processor_name="p", problems=ProblemCollector(), has_dlq=True)
    with pytest.raises(PipelineInvalid) as info:
        compile_pipeline(parse_pipeline([SOURCE, stage]), ctx)
    return [(p.code, p.path) for p in info.value.problems]


@pytest.mark.parametrize("key", list(WINDOWS))
def test_trigger_and_mode_are_refused(spark: Any, key: str) -> None:
    body = {**WINDOWS[key], "trigger": {"early": {"count": 2}}, "accumulationMode": "discarding"}
    assert _compile_problems(spark, {key: body}) == [
        ("unsupported_option", f"/pipeline/1/{key}/trigger"),
        ("unsupported_option", f"/pipeline/1/{key}/accumulationMode"),
    ]


def test_global_window_is_refused(spark: Any) -> None:
    body = {"trigger": {"early": {"count": 2}}, "pipeline": [GROUP]}
    assert _compile_problems(spark, {"$globalWindow": body}) == [
        ("unsupported_option", "/pipeline/1/$globalWindow/trigger")
    ]


@pytest.mark.parametrize("key", list(WINDOWS))
def test_windows_without_the_fields_still_compile(spark: Any, key: str) -> None:
    register_all(spark)
    ctx = CompileContext(spark=spark, processor_name="p", problems=ProblemCollector(), has_dlq=True)
    compiled = compile_pipeline(parse_pipeline([SOURCE, {key: WINDOWS[key]}]), ctx)
    assert compiled.has_window
