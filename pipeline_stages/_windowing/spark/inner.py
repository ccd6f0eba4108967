"""The per-document part of a window's inner pipeline, compiled natively before the operator.

A window's inner pipeline is cut in three (atlas-semantics.md §3.6.4):

* the *prefix*: stateless stages before the first blocking stage (`$group`, `$sort`,
  `$limit`, `$count`). They run per document, natively, as the main pipeline's stages do; a
  document they drop becomes a tick (it still moves the watermark) and one they fail goes to
  the DLQ with the stage's operator name;
* the *blocking run*: the first blocking stage and the blocking stages right after it. The
  operator runs it in Python when a window closes. When it starts with `$group`, the `_id` and
  the accumulator arguments are compiled natively here too, so the operator gets compact
  typed values (and a failing expression sends its document to the DLQ as `GroupOperator`);
* the *suffix*: the stateless stages after the blocking run, compiled natively on the
  operator's output by `spark.compile`.

Fixed windows whose per-document part reads the window (`{$meta: "stream.window..."}`,
`_stream_meta`, `$$ROOT`) or that carry whole documents (no `$group`) are *exploded*: each
document becomes one row per window containing it before the prefix runs, with the window in
its metadata. Otherwise rows stay one per document and the operator assigns windows itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode
from pipeline_stages._connectors.sources.scripted import CLOCK_PART
from pipeline_stages._entry import entry_of
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.paths import set_field
from pipeline_stages._mql.scope import Expr, Scope
from pipeline_stages._stream.frame import (
    DLQ_OPERATOR,
    DLQ_REASON,
    DOC,
    EVENT_MS,
    KIND,
    KIND_TICK,
    META,
    PART,
    SUB,
    StreamFrame,
)
from pipeline_stages._stream.stage_counts import compile_counted
from pipeline_stages._windowing.geometry import WindowGeometry
from pipeline_stages._windowing.runtime import config as C

BLOCKING = frozenset({"$group", "$sort", "$limit", "$count"})
#: Text that makes a per-document expression depend on the window or the whole document.
_WINDOW_MARKERS = ("$meta", "$$ROOT", "$$CURRENT", "_stream_meta")
#: The operator that DLQs late documents when the inner pipeline starts with a non-window
#: stage: the planner's implicit `$limit` (the reference model's rule).
_FIRST_OPERATORS = {"$group": "GroupOperator", "$count": "GroupOperator", "$sort": "SortOperator"}


@dataclass(frozen=True)
class InnerStage:
    """One inner stage with its key, spec and absolute JSON path."""

    key: str
    spec: Any
    path: str


@dataclass(frozen=True)
class InnerSplit:
    """The inner pipeline cut into prefix, blocking run and suffix (see the module doc)."""

    prefix: tuple[InnerStage, ...]
    blocking: tuple[InnerStage, ...]
    suffix: tuple[InnerStage, ...]

    @property
    def first_operator(self) -> str:
        """The DLQ operator of late documents: the first window-aware operator."""
        first = (self.prefix or self.blocking or (None,))[0]
        return _FIRST_OPERATORS.get(first.key if first else "", "LimitOperator")

    @property
    def state_operator(self) -> str:
        """The operator holding the window's state: the blocking run's first stage, or the
        implicit `$limit` of a window without one (`first_operator`)."""
        if not self.blocking:
            return self.first_operator
        return entry_of(self.blocking[0].spec).operator_name or self.first_operator

    @property
    def results_operator(self) -> str:
        """The operator whose output the window operator emits: the blocking run's last
        stage, or the implicit `$limit` of a window without one (`first_operator`)."""
        if not self.blocking:
            return self.first_operator
        return entry_of(self.blocking[-1].spec).operator_name or self.first_operator


def split_inner(stages: Sequence[InnerStage], problems: Any) -> InnerSplit:
    """Cut the inner pipeline; a blocking stage after a stateless one after the run is refused."""
    cut = next((i for i, s in enumerate(stages) if s.key in BLOCKING), len(stages))
    end = cut
    while end < len(stages) and stages[end].key in BLOCKING:
        end += 1
    for stage in stages[end:]:
        if stage.key in BLOCKING:
            problems.error(
                stage.path,
                ProblemCode.UNSUPPORTED_OPTION,
                f"{stage.key} after a stateless stage that follows the window's first "
                "$group/$sort is not supported yet; move it next to the blocking stages",
            )
    return InnerSplit(tuple(stages[:cut]), tuple(stages[cut:end]), tuple(stages[end:]))


def _spec_text(stages: Sequence[InnerStage]) -> str:
    return json.dumps([s.spec.model_dump(mode="json", by_alias=True) for s in stages], default=str)


def reads_window(stages: Sequence[InnerStage]) -> bool:
    """Whether per-document expressions may read the window or the whole document."""
    text = _spec_text(stages)
    return any(marker in text for marker in _WINDOW_MARKERS)


# --------------------------------------------------------------------------- flags


def with_flags(frame: StreamFrame, *, test_clock: bool, has_dlq: bool) -> StreamFrame:
    """Classify the rows reaching the window (`runtime.config` flags) and keep the original
    document (late documents' DLQ records show the document as it entered the window)."""
    failed = F.col(DLQ_REASON).isNotNull()
    flag = (
        F.when(F.lit(test_clock) & (F.col(PART) == CLOCK_PART), F.lit(C.FLAG_CLOCK))
        .when(failed & (F.col(DLQ_OPERATOR) == "SourceOperator"), F.lit(C.FLAG_SOURCE_FAILED))
        .when(failed, F.lit(C.FLAG_FAILED_BEFORE))
        .when(F.col(KIND) == KIND_TICK, F.lit(C.FLAG_TICK))
        .otherwise(F.lit(C.FLAG_OK))
    )
    df = frame.df.withColumn(C.FLAG, flag.cast("tinyint"))
    is_ok = F.col(C.FLAG) == C.FLAG_OK
    is_failed = F.col(C.FLAG).isin(C.FLAG_FAILED_BEFORE, C.FLAG_SOURCE_FAILED)
    df = df.withColumns(
        {
            C.DOC_SUB: F.col(SUB),
            # The document, for the few that turn out late. Every healthy row ships it
            # (lateness is decided per document, in arrival order, after shipping). Each
            # engine picks the form it ships (`spark.compile`): JSON text to the operator,
            # the VARIANT itself through Arrow to the batch engine.
            C.ORIG: F.when(is_ok & F.lit(has_dlq), F.col(DOC)),
            C.FDOC: F.when(is_failed, F.to_json(F.col(DOC))),
            C.FMETA: F.when(is_failed, F.to_json(F.col(META))),
            C.REASON: F.when(is_failed, F.col(DLQ_REASON)),
            C.OPERATOR: F.when(is_failed, F.col(DLQ_OPERATOR)),
        }
    )
    return StreamFrame(df)


def window_object(start: Column, end: Column) -> Column:
    """`{start: <date>, end: <date>}` as a VARIANT object."""
    return F.to_variant_object(
        F.named_struct(F.lit("start"), V.from_epoch_ms(start), F.lit("end"), V.from_epoch_ms(end))
    )


def explode_fixed(frame: StreamFrame, geometry: WindowGeometry, *, meta_field: str) -> StreamFrame:
    """One row per (document, window containing it), the window set in its metadata.

    Documents in a hop gap (no window contains them) become ticks. Rows other than healthy
    documents keep one row with no window.
    """
    t = F.col(EVENT_MS)
    size, hop = geometry.interval_ms, geometry.hop_ms
    ok = F.col(C.FLAG) == C.FLAG_OK
    if geometry.is_global:  # one window holding every date; its metadata has no start or end
        starts = F.array(F.lit(0).cast("bigint"))
        win = F.parse_json(F.lit("{}"))
    else:
        oldest = F.greatest(t - size + hop - F.pmod(t - geometry.offset_ms, F.lit(hop)), F.lit(0))
        grid = F.when(oldest <= t, F.sequence(oldest, t, F.lit(hop).cast("bigint")))
        starts = F.filter(F.coalesce(grid, F.array().cast("array<bigint>")), lambda s: t < s + size)
        win = window_object(F.col(C.WSTART), F.col(C.WSTART) + size)
    chosen = F.when(ok & (F.size(starts) > 0), starts).otherwise(F.array(F.lit(None)))
    df = frame.df.select("*", F.posexplode(chosen.cast("array<bigint>")).alias("__w_pos", C.WSTART))
    in_gap = ok & F.col(C.WSTART).isNull()
    has_window = F.col(C.WSTART).isNotNull()
    doc = F.col(DOC)
    if meta_field:
        doc = set_field(doc, f"{meta_field}.window", Expr(value=win)).value
    df = df.withColumns(
        {
            DOC: F.when(has_window, doc)
            .when(in_gap, F.lit(None).cast("variant"))
            .otherwise(F.col(DOC)),
            META: F.when(
                has_window, set_field(F.col(META), "window", Expr(value=win)).value
            ).otherwise(F.col(META)),
            KIND: F.when(in_gap, F.lit(KIND_TICK)).otherwise(F.col(KIND)),
            C.FLAG: F.when(in_gap, F.lit(C.FLAG_TICK).cast("tinyint")).otherwise(F.col(C.FLAG)),
            C.ORIG: F.when(F.col("__w_pos") == 0, F.col(C.ORIG)),
        }
    )
    return StreamFrame(df.drop("__w_pos"))


def compile_prefix(frame: StreamFrame, prefix: Sequence[InnerStage], ctx: Any) -> StreamFrame:
    """Run the prefix stages natively; their drops become flag 6, their failures flag 3."""
    saved = ctx.window_ahead
    ctx.window_ahead = True
    try:
        for stage in prefix:
            frame = compile_counted(stage.spec, frame, ctx, stage.path)
    finally:
        ctx.window_ahead = saved
    return mark_inside_failures(frame, dropped=True)


def mark_inside_failures(frame: StreamFrame, *, dropped: bool) -> StreamFrame:
    """Flag rows that entered the window healthy and failed (or were dropped) since."""
    was_ok = F.col(C.FLAG) == C.FLAG_OK
    fails = was_ok & F.col(DLQ_REASON).isNotNull()
    flag = F.when(fails, F.lit(C.FLAG_FAILED_INSIDE))
    if dropped:
        flag = flag.when(was_ok & (F.col(KIND) == KIND_TICK), F.lit(C.FLAG_DROPPED_INSIDE))
    df = frame.df.withColumns(
        {
            C.FLAG: flag.otherwise(F.col(C.FLAG)).cast("tinyint"),
            C.FDOC: F.when(fails, F.to_json(F.col(DOC))).otherwise(F.col(C.FDOC)),
            C.FMETA: F.when(fails, F.to_json(F.col(META))).otherwise(F.col(C.FMETA)),
            C.REASON: F.when(fails, F.col(DLQ_REASON)).otherwise(F.col(C.REASON)),
            C.OPERATOR: F.when(fails, F.col(DLQ_OPERATOR)).otherwise(F.col(C.OPERATOR)),
        }
    )
    return StreamFrame(df)


# --------------------------------------------------------------------------- values


def value_columns(value: Column, target: C.ValueColumns, scope: Scope) -> dict[str, Column]:
    """Typed columns for one MQL value (see `ValueColumns`).

    Typed by `schema_of_variant`, which is as cheap as reading the value for scalars (measured:
    `to_json` plus `try_cast` costs ~10x more; a full MQL type tag is a dozen probes):
    integers and doubles (decimals parsed from JSON are MQL doubles) travel as numbers, every
    other value as Extended JSON for the operator to decode.
    """
    bound = scope.bind(value)
    schema = scope.bind(F.schema_of_variant(bound))
    integral = schema.isin("BIGINT", "INT", "SMALLINT", "TINYINT")
    double = schema.isin("DOUBLE", "FLOAT") | schema.startswith("DECIMAL")
    code = (
        F.when(bound.isNull(), F.lit(C.CODE_MISSING))
        .when(integral, F.lit(C.CODE_INT))
        .when(double, F.lit(C.CODE_DOUBLE))
        .otherwise(F.lit(C.CODE_JSON))
    )
    k, i, d, j = target.names
    return {
        k: code.cast("tinyint"),
        i: F.when(integral, F.try_variant_get(bound, "$", "bigint")).otherwise(F.lit(0)),
        d: F.when(double, F.try_variant_get(bound, "$", "double")).otherwise(F.lit(0.0)),
        j: F.when(bound.isNotNull() & ~integral & ~double, F.to_json(bound)),
    }


def json_or_null(value: Column) -> Column:
    """The value's Extended JSON text; missing becomes `null` (a group `_id` of missing)."""
    return F.coalesce(F.to_json(value), F.lit("null"))
