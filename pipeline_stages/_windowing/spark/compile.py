"""Compile a window stage into one `applyInPandasWithState` over the stream frame.

    frame ─ flags ─ [partitionBy] ─ [explode] ─ prefix (native) ─ [$group inputs (native)]
          ─ compact columns ─ groupBy(bucket).applyInPandasWithState(window operator)
          ─ [suffix stages (native), on the results] ─ envelopes

Every row of the frame reaches the operator: ticks and failed rows too, because Atlas's
watermark comes from the source (filtered and failed documents still advance it) and the
operator's output is the query's only output (failed rows leave as DLQ envelopes). The
operator keeps its own watermark, so no Spark `withWatermark` is involved.

Buckets: one bucket by default: one watermark over the whole stream, per-document lateness
in arrival order, global idleness, Atlas's semantics. Setting the Spark conf
`spark.sluice.window.buckets` to P > 1 spreads the `$group` work of tumbling and hopping
windows over P buckets (P Python workers, P tasks on a cluster) with the same semantics and
the same results (`_bucketed`): each row goes to the bucket of its `$group` key, and every
other bucket gets a shadow of it (its position, event time and window start, no content), so
every bucket runs the same clock, the same lateness decisions, the same window set and the
same closes, and only folds and emits its own groups. A late document goes to the DLQ from
its owner only. The sink merges the buckets' envelopes by source position and, for results,
by the rank of their window (`Emitter.begin_window`). The shadows cost a shuffled row per
bucket per row; the clock work is repeated in every bucket, the content work is divided.
Windows whose blocking stages need all of a window's documents in one place (`$sort`,
`$limit`, `$count` or a second `$group` after the `$group`, pass-through windows, session and
sliding windows) keep all their rows in bucket 0 (`OperatorSpec.splits_groups`): exact, not
parallel.

The Spark conf `spark.sluice.window.engine=batch` asks for the batch engine instead
(`batch.engine`: the operator's code run per micro-batch in the driver, from `foreachBatch`);
it takes the windows without a wall-clock rule (`batch.engine.ineligible`), the operator the
rest. Both plans are built; the planner (`plan`) picks the engine's when there is one. Both
read the source's unstamped documents where that gives the same results (`spark.unstamped`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout
from pyspark.sql.types import NumericType

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._entry import key_of
from pipeline_stages._stream.context import WindowPlan
from pipeline_stages._stream.envelope import (
    ENVELOPE_SCHEMA,
    envelope_from_frame,
    frame_from_envelope,
)
from pipeline_stages._stream.frame import DOC, EVENT_MS, PART, SEQ, SUB, StreamFrame
from pipeline_stages._stream.stage_counts import compile_counted, counted
from pipeline_stages._windowing.batch.engine import (
    ENGINE_CONF,
    ENGINES,
    BatchWindow,
    ineligible,
    shipped_columns,
)
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.blocking import is_simple
from pipeline_stages._windowing.runtime.operator import STATE_SCHEMA, make_operator
from pipeline_stages._windowing.runtime.stamp import Stamp
from pipeline_stages._windowing.spark.args import compile_group, compile_partition
from pipeline_stages._windowing.spark.inner import (
    InnerSplit,
    InnerStage,
    compile_prefix,
    explode_fixed,
    reads_window,
    split_inner,
    with_flags,
)
from pipeline_stages._windowing.spark.panes import pane_spec, with_pane_filters
from pipeline_stages._windowing.spark.state_partitions import spread_partitions
from pipeline_stages._windowing.spark.unstamped import (
    stamped_failures,
    unstamped_input,
    unstamped_reads,
)


@dataclass(frozen=True)
class WindowResult(WindowPlan):
    """A `WindowPlan` that also hands over its results as a frame when stages ran on them.

    Envelopes carry documents as JSON text, and `parse_json` reads `3.0` back as the integer
    3; handing the frame over avoids a second text round trip after the suffix stages.
    """

    frame: StreamFrame | None = None
    #: The batch engine, when it can run this window (`plan` decides whether it does).
    batch: BatchWindow | None = None


_WINDOW_META_MARKERS = ('"stream.window', '"stream"', "_stream_meta.window", '"$_stream_meta"')


def inner_stages(spec: Any, path: str, key: str) -> list[InnerStage]:
    """The window's inner stages with their absolute paths."""
    return [
        InnerStage(key_of(stage), stage, join_path(path, key, "pipeline", index))
        for index, stage in enumerate(spec.pipeline)
    ]


def _later(split: InnerSplit, problems: Any) -> tuple[C.LaterStage, ...]:
    later = []
    for stage in split.blocking[1:]:
        if stage.key == "$group":
            body = {"_id": stage.spec.id}
            for name, acc in stage.spec.accumulators.items():
                body[name] = {acc.operator: acc.argument}
            if not is_simple(body):
                problems.error(
                    join_path(stage.path, stage.key),
                    ProblemCode.UNSUPPORTED_OPTION,
                    "a $group after the window's first blocking stage may only use field "
                    "paths, $$ROOT, {$meta: 'stream.window...'} and constants",
                )
            later.append(C.LaterStage("$group", body))
        elif stage.key == "$sort":
            later.append(C.LaterStage("$sort", dict(stage.spec.keys)))
        elif stage.key == "$limit":
            later.append(C.LaterStage("$limit", stage.spec.limit))
        elif stage.key == "$count":
            later.append(C.LaterStage("$count", stage.spec.field))
        elif stage.key == "$match":  # with trigger only (`panes.with_pane_filters`)
            later.append(C.LaterStage("$match", stage.spec.filter))
    return tuple(later)


def _reads_window_meta(stages: list[InnerStage]) -> bool:
    text = json.dumps([s.spec.model_dump(mode="json", by_alias=True) for s in stages], default=str)
    return any(marker in text for marker in _WINDOW_META_MARKERS)


#: The Spark conf of the window operator's bucket count.
BUCKETS_CONF = "spark.sluice.window.buckets"


def bucket_count(ctx: Any) -> int:
    """The checkpoint's bucket count (`CompileContext.window_buckets`), else the Spark conf's."""
    return ctx.window_buckets or conf_bucket_count(ctx.spark)


def conf_bucket_count(spark: Any) -> int:
    """`spark.sluice.window.buckets` (1 when unset or not a positive integer)."""
    try:
        return max(1, int(spark.conf.get(BUCKETS_CONF, "1")))
    except (TypeError, ValueError):
        return 1


def engine_name(ctx: Any) -> str:
    """The window engine of the checkpoint being run (`CompileContext.window_engine`), else
    the one the Spark conf `spark.sluice.window.engine` asks for (unchecked: `_engine`)."""
    return ctx.window_engine or ctx.spark.conf.get(ENGINE_CONF, "operator") or "operator"


def reads_in_one_task(ctx: Any) -> bool:
    """Whether a window compiled in `ctx` reads every micro-batch in one task whatever its
    kind: the operator engine with one bucket coalesces its input to one partition
    (`_operator`), so the source's tasks would run one after the other in that task anyway.
    With P > 1 buckets only the windows that do not split their groups coalesce, which the
    source, compiled first, cannot tell; it keeps its tasks there."""
    return engine_name(ctx) == "operator" and bucket_count(ctx) == 1


def compile_window(
    spec: Any,
    frame: StreamFrame,
    ctx: Any,
    path: str,
    *,
    key: str,
    kind: str,
    geometry: WindowGeometry | C.SessionGeometry | C.SlidingGeometry,
    partition_by: Any = None,
) -> WindowPlan:
    """The `compile` of the four window stages (see the module docstring)."""
    source = C.window_source(ctx)
    problems = ctx.problems
    panes = pane_spec(spec)
    split = split_inner(inner_stages(spec, path, key), problems)
    if panes is not None:
        split = with_pane_filters(split, key, problems)
    if kind != "fixed" and not split.blocking:
        # A session/sliding window is only known when it closes, and a window without a
        # blocking stage is stateless inside: run it all on the emitted documents, where the
        # window is known (its errors then reach the DLQ at close, as for the other stages).
        split = InnerSplit(prefix=(), blocking=(), suffix=split.prefix)
    first = split.blocking[0] if split.blocking else None
    group_stage = first if first is not None and first.key in ("$group", "$count") else None
    per_document = [*split.prefix, *([group_stage] if group_stage else [])]
    exploded = kind == "fixed" and (group_stage is None or reads_window(per_document))
    if kind != "fixed" and _reads_window_meta(per_document):
        problems.error(
            join_path(path, key, "pipeline"),
            ProblemCode.UNSUPPORTED_OPTION,
            f"{key}: reading the window (stream.window / _stream_meta.window) before the "
            "first $group/$sort is not supported: the window is only known when it closes",
        )
    buckets = bucket_count(ctx)

    def operator_input(
        frame: StreamFrame, ctx: Any
    ) -> tuple[C.OperatorSpec, tuple[Any, list[str]]]:
        """The operator's spec and input columns over the documents entering the window."""
        problems = ctx.problems
        frame = with_flags(frame, test_clock=source.test_clock, has_dlq=ctx.has_dlq)
        if kind != "fixed":
            frame = compile_partition(
                frame,
                partition_by,
                path=join_path(path, key, "partitionBy"),
                operator=split.first_operator,
                problems=problems,
            )
        if exploded and isinstance(geometry, WindowGeometry):
            frame = explode_fixed(frame, geometry, meta_field=source.meta_field)
        frame = compile_prefix(frame, split.prefix, ctx)
        # The documents reaching the window's state (late ones too: the operator sends them
        # to the DLQ), one per window they enter when exploded.
        frame = counted(
            frame,
            operator=split.state_operator,
            path=first.path if first is not None else join_path(path, key, "pipeline"),
            counter="inputMessageCount",
        )
        group_plan = None
        if group_stage is not None:
            frame, group_plan = compile_group(frame, group_stage, problems)
        first_sort = first if first is not None and first.key == "$sort" else None
        inner = C.InnerPlan(
            group=group_plan,
            sort=tuple(first_sort.spec.keys.items()) if first_sort is not None else None,
            later=_later(split, problems),
            needs_doc=group_plan is None,
            exploded=exploded,
            first_operator=split.first_operator,
            state_operator=split.state_operator,
            results_operator=split.results_operator,
        )
        op_spec = C.OperatorSpec(
            kind=kind,
            geometry=geometry,
            allowed_lateness_ms=spec.allowed_lateness_ms(),
            idle_timeout_ms=spec.idle_timeout_ms(),
            processing_time=not spec.event_time,
            inner=inner,
            source=source,
            has_dlq=ctx.has_dlq,
            partitioned=partition_by is not None,
            bucket_count=buckets,
            panes=panes,
        )
        return op_spec, _shipped(frame, op_spec)

    unstamped = None
    if not exploded and unstamped_reads(ctx.spark):
        entering = [*split.prefix, *split.blocking[:1]]
        unstamped = unstamped_input(frame, entering, partition_by)
    if unstamped is None:
        op_spec, shipped = operator_input(frame, ctx)
    else:
        op_spec, shipped = operator_input(StreamFrame(unstamped.df), ctx)
        shipped = stamped_failures(shipped, unstamped)
    stamp = (unstamped.ts_field, unstamped.meta_field) if unstamped is not None else None
    timers = _timers(ctx, op_spec, join_path(path, key))
    envelopes = _operator(shipped, op_spec, stamp, timers=bool(timers))
    closes_on_clock = op_spec.idle_timeout_ms is not None or op_spec.processing_time
    state_partitions = spread_partitions(op_spec.bucket_count) if op_spec.splits_groups else 1
    batch = None
    if _engine(ctx, path, key) == "batch" and ineligible(op_spec) is None:
        if panes is not None:
            problems.error(
                join_path(path, key, "trigger"),
                ProblemCode.UNSUPPORTED_OPTION,
                f"{key}: trigger is not supported by the batch window engine "
                f"({ENGINE_CONF}=batch) yet: it does not fire panes; the operator engine does",
            )
        batch = _batch_window(shipped, op_spec, tuple(split.suffix), stamp)
    if not split.suffix:
        return WindowResult(
            envelopes=envelopes,
            batch=batch,
            closes_on_clock=closes_on_clock,
            fires_panes_on_clock=op_spec.fires_panes_on_clock,
            runs_when_idle=op_spec.runs_when_idle,
            state_partitions=state_partitions,
            operator_timers=timers,
        )
    after = frame_from_envelope(envelopes)
    for stage in split.suffix:
        after = compile_counted(stage.spec, after, ctx, stage.path)
    return WindowResult(
        envelopes=envelope_from_frame(after),
        frame=after,
        batch=batch,
        closes_on_clock=closes_on_clock,
        fires_panes_on_clock=op_spec.fires_panes_on_clock,
        runs_when_idle=op_spec.runs_when_idle,
        state_partitions=state_partitions,
        operator_timers=timers,
    )


#: The owning bucket of a row, while its copies to every bucket are made (`_bucketed`).
_OWNER = "__w_owner"


def _bucketed(df: Any, columns: list[str], spec: C.OperatorSpec) -> Any:
    """`columns` of `df` with each row's bucket (`C.BUCKET`), such that every bucket decides
    what one bucket would (see the module docstring).

    One bucket, or a window whose content cannot be split (`OperatorSpec.splits_groups`): every
    row goes to bucket 0. Groups split over P buckets: a row goes to every bucket, itself to
    its owner (the bucket of its `$group` key; rows without one, by source position) and as a
    shadow to the others: the same position, event time and window start, the flag of what it
    does to the clock and the window set (`C.SHADOW_FLAGS`), no content.
    """
    if not spec.splits_groups:
        return df.select(F.lit(0).alias(C.BUCKET), *columns)
    count = spec.bucket_count
    entered = F.col(C.FLAG).isin(*C.ENTERED)
    by_position = F.pmod(F.hash(F.col(SEQ), F.col(PART)), F.lit(count))
    owner = F.when(entered, F.pmod(F.hash(F.col(C.KEY)), F.lit(count))).otherwise(by_position)
    every = F.explode(F.sequence(F.lit(0), F.lit(count - 1))).alias(C.BUCKET)
    rows = df.select(owner.alias(_OWNER), every, *columns)
    own = F.col(C.BUCKET) == F.col(_OWNER)
    shadows = F.create_map(*[F.lit(v) for pair in C.SHADOW_FLAGS.items() for v in pair])
    shadow_flag = shadows[F.col(C.FLAG)]
    kept = {PART, SEQ, SUB, C.DOC_SUB, EVENT_MS, C.WSTART}
    types = {f.name: f.dataType for f in df.schema.fields}
    shipped = [F.col(C.BUCKET)]
    for name in columns:
        if name == C.FLAG:
            shipped.append(F.when(own, F.col(name)).otherwise(shadow_flag).cast("tinyint"))
        elif name in kept:
            shipped.append(F.col(name))
        elif isinstance(types[name], NumericType):
            # Zero, not NULL: pandas would turn the whole integer column into floats.
            shipped.append(F.when(own, F.col(name)).otherwise(F.lit(0).cast(types[name])))
        else:
            shipped.append(F.when(own, F.col(name)))
    return rows.select(*[c.alias(n) for c, n in zip(shipped, [C.BUCKET, *columns], strict=True)])


def _timers(ctx: Any, spec: C.OperatorSpec, path: str) -> bool | None:
    """Whether the operator's query gets processing-time timeouts (None: a test clock's query,
    which has none and no checkpoint to record them in).

    Only a wall-clock rule sets a timeout (`OperatorSpec.runs_when_idle`), but with timeouts
    in the plan Spark calls the operator's function a second time in every micro-batch, for
    timed-out state, even when none is due (~50 ms a batch, `benchmarks/RESULTS.md`). So a new
    checkpoint has them only when a rule needs them. Spark's state keeps a timeout column
    only with timeouts, so a checkpoint keeps what it started with
    (`CompileContext.window_timers`); one without them cannot take on a wall-clock rule.
    """
    if spec.source.test_clock:
        return None
    if ctx.window_timers is None:
        return spec.runs_when_idle
    if spec.runs_when_idle and not ctx.window_timers:
        ctx.problems.error(
            path,
            ProblemCode.UNSUPPORTED_OPTION,
            "this processor's checkpoint runs its window without wall-clock timers, and the "
            "pipeline now needs them (idleTimeout, partitionIdleTimeout, a processing-time "
            "boundary or an `every` trigger): start it with resumeFromCheckpoint: false",
        )
    return bool(ctx.window_timers)


def _operator(
    shipped: tuple[Any, list[str]], spec: C.OperatorSpec, stamp: Stamp | None, *, timers: bool
) -> Any:
    """Ship the compact columns (`_shipped`) to the operator and run it; `stamp`: the
    documents are the source's unstamped ones (`spark.unstamped`); `timers`: with
    processing-time timeouts (`_timers`)."""
    df, columns = shipped
    # The late-document copy (and its stream metadata) as JSON text: text beats the VARIANT
    # itself end to end here (measured, 1M rows in 125k batches, trivial operator: 72k vs 66k
    # rows/s), because PySpark turns each shipped VARIANT into a dict and a `VariantVal`
    # (0.31 s CPU per 125k rows, as much as the operator's own work). The batch engine reads
    # Arrow instead and ships the VARIANT (`batch.engine.shipped_rows`).
    as_text = df.select(
        *[F.to_json(c).alias(c) if c in (C.ORIG, C.OMETA) else F.col(c) for c in columns]
    )
    compact = _bucketed(as_text, columns, spec)
    if not spec.splits_groups:
        # Every row goes to bucket 0, whose state a new checkpoint keeps in one partition
        # (`state_partitions`): one partition already satisfies the operator's distribution,
        # so Spark plans no shuffle, and the source's read, the operator and the sink run as
        # one stage. That saves a stage and a shuffle in every micro-batch (a 1-row batch's
        # job 269 -> ~210 ms, `benchmarks/RESULTS.md`); what it costs is the source's read in
        # one task instead of several, within noise end to end (-2 % at 10k rows a batch,
        # -5 % at 120k, one run each). A checkpoint started on more state partitions keeps
        # them, and Spark shuffles after the coalesce. With one bucket the File, HTTP-ingest
        # and Kafka sources read each batch in one task (`reads_in_one_task`): the tasks a
        # source cuts a batch into would run one after the other in this task, each one more
        # Python read to start (tumbling +5-19 % end to end at 10k rows a batch, the other
        # cases within noise: `benchmarks/RESULTS.md`, eighteenth session).
        compact = compact.coalesce(1)
    timeout = GroupStateTimeout.ProcessingTimeTimeout if timers else GroupStateTimeout.NoTimeout
    return compact.groupBy(C.BUCKET).applyInPandasWithState(
        make_operator(spec, stamp), ENVELOPE_SCHEMA, STATE_SCHEMA, "append", timeout
    )


def _shipped(frame: StreamFrame, spec: C.OperatorSpec) -> tuple[Any, list[str]]:
    """The frame and the names of the columns the operator (or the batch engine) reads."""
    inner = spec.inner
    columns = [PART, SEQ, SUB, C.DOC_SUB, EVENT_MS, C.FLAG, C.ORIG, C.FDOC, C.FMETA, C.REASON,
               C.OPERATOR]  # fmt: skip
    df = frame.df
    if inner.exploded:
        columns.append(C.WSTART)
    if inner.group is not None:
        columns.append(C.KEY)
        shipped = {
            values.prefix: values for acc in inner.group.accumulators for values in acc.inputs
        }
        for values in shipped.values():
            columns.extend(values.names)
    if spec.kind != "fixed":
        columns.append(C.PKEY)
    if inner.needs_doc:
        df = df.withColumn(C.DOCJ, F.when(F.col(C.FLAG) == C.FLAG_OK, F.to_json(F.col(DOC))))
        columns.append(C.DOCJ)
    return df, columns


def _engine(ctx: Any, path: str, key: str) -> str:
    """`engine_name`, with a problem recorded when it names no engine."""
    engine = engine_name(ctx)
    if engine not in ENGINES:
        ctx.problems.error(
            join_path(path, key),
            ProblemCode.UNSUPPORTED_OPTION,
            f"{ENGINE_CONF} is {engine!r}; it must be one of {', '.join(ENGINES)}",
        )
    return engine


def _batch_window(
    shipped: tuple[Any, list[str]],
    spec: C.OperatorSpec,
    suffix: tuple[InnerStage, ...],
    stamp: Stamp | None,
) -> BatchWindow:
    """The batch engine for this window, over the operator's input (`_shipped`): of the
    unstamped documents when `stamp` is given (`runtime.stamp`)."""
    df, columns = shipped
    return BatchWindow(spec, df.select(*shipped_columns(columns, stamp)), suffix, stamp)
