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

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame

from pipeline_stages._base import WINDOW_STAGE_KEYS, ProblemCollector
from pipeline_stages._connectors.sinks.plans import computed_names
from pipeline_stages._connectors.sinks.targets import prepare_frame
from pipeline_stages._connectors.sources.rate_limit import Limit
from pipeline_stages._connectors.sources.throttled import encode_limits
from pipeline_stages._engine.sink import ForeachBatchSink
from pipeline_stages._entry import entry_of
from pipeline_stages._stream.context import CompileContext, SourcePlan, WindowPlan
from pipeline_stages._stream.envelope import envelope_from_frame, frame_from_envelope
from pipeline_stages._stream.frame import StreamFrame
from pipeline_stages._stream.stage_counts import compile_counted
from pipeline_stages._windowing.runtime.config import WindowSource
from pipeline_stages._windowing.spark.compile import bucket_count, reads_in_one_task

if TYPE_CHECKING:
    from pipeline_stages import ParsedPipeline


@dataclass(frozen=True)
class CompiledPipeline:
    """A pipeline ready to run: its envelope stream plus what the runner needs to know."""

    envelopes: DataFrame
    finite_total: int | None
    has_window: bool
    closes_on_clock: bool
    #: Whether panes fire on the wall clock (`WindowPlan.fires_panes_on_clock`).
    fires_panes_on_clock: bool
    #: Whether the query needs Spark's micro-batches without input (`start_query`).
    runs_when_idle: bool
    sink: Any | None
    source_type: str
    #: The batch window engine, when it runs the window: `envelopes` is then its input,
    #: and the sink runs it (and the stages after it) per micro-batch
    #: (`ForeachBatchSink(window=...)`).
    batch_window: Any | None = None
    #: The shuffle partitions a new checkpoint of this query starts with (`start_query`), when
    #: the window operator's state needs fewer than the session's: Spark calls the operator's
    #: Python function once per partition and micro-batch, empty partitions included, and a
    #: one-bucket operator's rows all go to one (`WindowPlan.state_partitions`). Spark keeps
    #: an existing checkpoint's count (its offset log's), whatever the session says.
    state_partitions: int | None = None
    #: Whether the window operator's query has processing-time timeouts, which a checkpoint
    #: keeps (`WindowPlan.operator_timers`); None: no window operator.
    window_timers: bool | None = None

    def foreach_batch(
        self,
        writer: Any,
        *,
        processor: str,
        state_dir: str | None,
        input_counts: Callable[[int], dict[str, Any] | None] | None = None,
    ) -> ForeachBatchSink:
        """The `foreachBatch` function writing this pipeline's micro-batches to `writer`;
        a batch window engine keeps its state in `state_dir` (None: in memory). With a batch
        window engine, writes trail Spark's progress: see `ForeachBatchSink.flush`/`close`.
        `input_counts` reads each batch's input counts for the writer (`InputMetrics`)."""
        if self.batch_window is not None:
            self.batch_window.bind(state_dir)
        return ForeachBatchSink(
            writer, processor=processor, window=self.batch_window, input_counts=input_counts
        )


def compile_pipeline(parsed: ParsedPipeline, ctx: CompileContext) -> CompiledPipeline:
    """Compile every stage in order; raises `PipelineInvalid` with all problems found."""
    source_stage = parsed.stages[0]
    _prepare_throttle(parsed, ctx)
    _prepare_source_tasks(parsed, ctx)
    source_plan: SourcePlan = entry_of(source_stage.spec).module.compile(
        source_stage.spec, ctx, source_stage.path
    )
    return compile_after_source(parsed, source_plan, ctx)


def compile_after_source(
    parsed: ParsedPipeline,
    source_plan: SourcePlan,
    ctx: CompileContext,
    *,
    test_clock: bool = False,
    partitions: int | None = None,
) -> CompiledPipeline:
    """Compile the stages after `$source` on an already compiled source.

    Tests substitute their own source here (`sources.scripted`); `test_clock` makes the window
    operator read processing time from the source's clock rows.
    """
    source_stage, *rest = parsed.stages
    ctx.window_source = _window_source(source_stage.spec, source_plan, test_clock, partitions)  # type: ignore[attr-defined]
    if any(stage.key in WINDOW_STAGE_KEYS for stage in rest):
        _bound_state_partitions(ctx)
    frame: StreamFrame = source_plan.frame
    sink: Any | None = None
    window: WindowPlan | None = None
    batch_window: Any | None = None
    after_window: list[Any] = []
    ctx.window_ahead = any(stage.key in WINDOW_STAGE_KEYS for stage in rest)
    for index, stage in enumerate(rest):
        module = entry_of(stage.spec).module
        if stage.key in WINDOW_STAGE_KEYS:
            ctx.window_ahead = False
        if stage is parsed.sink:
            # A last `$https` is the sink too: its module's `compile_sink` makes the plan.
            sink = getattr(module, "compile_sink", module.compile)(stage.spec, ctx, stage.path)
            # A sink target computed per document (`into.db` as an expression…) is evaluated
            # here, on the last frame, and travels to the writer in the row's metadata.
            frame = prepare_frame(sink, frame, ctx, stage.path, key=stage.key)
        elif stage.key in WINDOW_STAGE_KEYS:
            window = module.compile(stage.spec, frame, ctx, stage.path)
            ctx.after_window = True
            batch_window = getattr(window, "batch", None)
            after_window = rest[index + 1 :]
            # A window that ran stages on its results hands them over as a frame.
            handed = getattr(window, "frame", None)
            frame = handed if handed is not None else frame_from_envelope(window.envelopes)
        else:
            frame = compile_counted(stage.spec, frame, ctx, stage.path)
    ctx.problems.raise_if_any()
    if batch_window is not None:
        batch_window.after = _after_window(
            batch_window.suffix, after_window, sink, ctx, sink_stage=parsed.sink
        )
    return CompiledPipeline(
        envelopes=batch_window.compact if batch_window is not None else envelope_from_frame(frame),
        finite_total=source_plan.finite_total,
        has_window=window is not None,
        closes_on_clock=window.closes_on_clock if window is not None else False,
        fires_panes_on_clock=window.fires_panes_on_clock if window is not None else False,
        runs_when_idle=window.runs_when_idle if window is not None else False,
        sink=sink,
        source_type=source_plan.source_type,
        batch_window=batch_window,
        state_partitions=(
            window.state_partitions if window is not None and batch_window is None else None
        ),
        window_timers=window.operator_timers if window is not None else None,
    )


def _prepare_throttle(parsed: ParsedPipeline, ctx: CompileContext) -> None:
    """Hand every `$throttle`'s rates to the source's reader, which enforces them where each
    micro-batch is planned (`sources.throttled`), and tell the stages what the source is."""
    source = parsed.stages[0].spec
    name = getattr(source, "connection_name", None)
    connection = ctx.connection(name) if name else None
    ctx.source_kind = "documents" if name is None else (connection.type if connection else "")
    limits = [
        Limit(
            getattr(stage.spec, "messages_per_sec", None),
            getattr(stage.spec, "bytes_per_sec", None),
        )
        for stage in parsed.stages[1:]
        if stage.key == "$throttle"
    ]
    ctx.throttle = encode_limits(limits) if limits else None


def _prepare_source_tasks(parsed: ParsedPipeline, ctx: CompileContext) -> None:
    """Read every micro-batch in one task when a window follows that runs in one anyway
    (`reads_in_one_task`); otherwise the source cuts large batches over the task slots."""
    windowed = any(stage.key in WINDOW_STAGE_KEYS for stage in parsed.stages[1:])
    if windowed and reads_in_one_task(ctx):
        ctx.source_tasks = 1


def _after_window(
    suffix: tuple[Any, ...],
    later: list[Any],
    sink: Any | None,
    ctx: CompileContext,
    *,
    sink_stage: Any = None,
) -> Callable[[DataFrame], DataFrame] | None:
    """What the batch window engine runs on each batch's window envelopes (None: nothing).

    The window's inner stages after its `$group`, the stages after the window and the sink's
    computed targets (`sink`: its compiled plan), compiled again on every batch's frame: the
    engine's results only exist in the driver. The streaming compile already reported their
    problems, so each batch compiles with a collector of its own."""
    stages = [*suffix, *later]
    if all(stage is sink_stage for stage in stages) and not (sink and computed_names(sink)):
        return None

    def apply(envelopes: DataFrame) -> DataFrame:
        local = copy.copy(ctx)
        local.problems = ProblemCollector()
        frame = frame_from_envelope(envelopes)
        for stage in stages:
            if stage is sink_stage:
                frame = prepare_frame(sink, frame, local, stage.path, key=stage.key)
            else:
                module = entry_of(stage.spec).module
                frame = module.compile(stage.spec, frame, local, stage.path)
        return envelope_from_frame(frame)

    return apply


def _bound_state_partitions(ctx: CompileContext) -> None:
    """Keep a window query from running 200 state-store partitions per micro-batch.

    The window operator's state lives in `spark.sql.shuffle.partitions` partitions, fixed when
    the query starts; with Spark's default of 200 every micro-batch (idle ones included) runs
    200 tasks, measured at ~28 s per batch on 2 cores. A session that kept the default gets
    one partition per window bucket instead. (Better set in the session's base configuration.)
    """
    conf = ctx.spark.conf
    if conf.get("spark.sql.shuffle.partitions") == "200":
        conf.set("spark.sql.shuffle.partitions", str(bucket_count(ctx)))


def _window_source(
    spec: Any, plan: SourcePlan, test_clock: bool, partitions: int | None
) -> WindowSource:
    """What the window operator needs to know about the source (see `WindowSource`)."""
    timeout = getattr(spec, "partition_idle_timeout", None)
    if partitions is None:
        # Kafka reports its partitions as they appear; every other source has one.
        partitions = getattr(plan, "partitions", None) or (
            None if getattr(spec, "topic", None) else 1
        )
    return WindowSource(
        source_type=plan.source_type,
        meta_field=getattr(spec, "stream_meta_field_name", "_stream_meta"),
        partitions=partitions,
        partition_idle_timeout_ms=timeout.ms if timeout is not None else None,
        test_clock=test_clock,
    )
