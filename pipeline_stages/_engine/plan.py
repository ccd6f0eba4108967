"""Compile a parsed pipeline into one Structured Streaming plan, stage by stage.

Each stage module exposes `compile`; the shape of its arguments depends on the stage's role:

- `$source`: `compile(spec, ctx, path) -> SourcePlan`;
- stateless stages: `compile(spec, frame, ctx, path) -> StreamFrame`;
- window stages: `compile(spec, frame, ctx, path) -> WindowPlan` (envelopes);
- sinks (`$emit`, `$merge`): `compile(spec, ctx, path) -> SinkPlan`, applied by the runner.

Compile problems (unknown operators in expressions, connection mismatches…) are collected in
`ctx.problems` and raised together at the end, so a user sees every problem at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from pipeline_stages._engine.context import CompileContext, SourcePlan, WindowPlan
from pipeline_stages._engine.envelope import envelope_from_frame, frame_from_envelope
from pipeline_stages._engine.frame import StreamFrame

if TYPE_CHECKING:
    from pipeline_stages import ParsedPipeline

WINDOW_KEYS = frozenset({"$tumblingWindow", "$hoppingWindow", "$sessionWindow", "$slidingWindow"})
SINK_KEYS = frozenset({"$emit", "$merge"})


@dataclass(frozen=True)
class CompiledPipeline:
    """A pipeline ready to run: its envelope stream plus what the runner needs to know."""

    envelopes: DataFrame
    finite_total: int | None
    has_window: bool
    closes_on_clock: bool
    sink: Any | None
    source_type: str


def compile_pipeline(parsed: ParsedPipeline, ctx: CompileContext) -> CompiledPipeline:
    """Compile every stage in order; raises `PipelineInvalid` with all problems found."""
    from pipeline_stages import REGISTRY

    source_stage, *rest = parsed.stages
    source_plan: SourcePlan = REGISTRY[source_stage.key].module.compile(
        source_stage.spec, ctx, source_stage.path
    )
    frame: StreamFrame = source_plan.frame
    sink: Any | None = None
    window: WindowPlan | None = None
    ctx.window_ahead = any(stage.key in WINDOW_KEYS for stage in rest)
    for stage in rest:
        module = REGISTRY[stage.key].module
        if stage.key in WINDOW_KEYS:
            ctx.window_ahead = False
        if stage.key in SINK_KEYS:
            sink = module.compile(stage.spec, ctx, stage.path)
        elif stage.key in WINDOW_KEYS:
            window = module.compile(stage.spec, frame, ctx, stage.path)
            frame = frame_from_envelope(window.envelopes)
        else:
            frame = module.compile(stage.spec, frame, ctx, stage.path)
    ctx.problems.raise_if_any()
    return CompiledPipeline(
        envelopes=envelope_from_frame(frame),
        finite_total=source_plan.finite_total,
        has_window=window is not None,
        closes_on_clock=window.closes_on_clock if window is not None else False,
        sink=sink,
        source_type=source_plan.source_type,
    )
