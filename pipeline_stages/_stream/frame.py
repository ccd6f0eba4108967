"""The stream frame: the DataFrame shape every stage reads and writes.

A frame carries one row per document in flight:

| column         | type    | meaning                                                        |
|----------------|---------|----------------------------------------------------------------|
| `part`, `seq`  | INT, BIGINT | source partition and arrival sequence (see `sources`)      |
| `event_ms`     | BIGINT  | event time in ms since the epoch                               |
| `doc`          | VARIANT | the document as the next stage sees it                         |
| `meta`         | VARIANT | stream metadata (`{$meta: "stream..."}`): `{source, window, …}` |
| `dlq_reason`   | STRING  | NULL while the document is healthy; the DLQ reason once failed |
| `dlq_operator` | STRING  | the Atlas operator name that failed it                         |
| `kind`         | STRING  | `out` for documents; the window operator adds `stats` rows    |
| `sub`          | INT     | orders several rows produced at one source position           |
| `missed`       | STRING  | JSON array of `missedWindowStartTimes` (late documents only)   |
| `window_start`, `window_key` | BIGINT, STRING | the window and group a result belongs to |

A stage never drops a failed row: it passes it through untouched, so a bad document travels to
the sink and becomes one DLQ record while the rest of the stream continues. The `doc` of a
failed row is the document as it entered the failing operator, which is what Atlas puts in the
DLQ record's `doc`.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline_stages._mql.scope import (
    Bindings,
    Expr,
    Predicate,
    Scope,
    apply_bindings,
    drop_bindings,
)

PART = "part"
SEQ = "seq"
EVENT_MS = "event_ms"
DOC = "doc"
META = "meta"
DLQ_REASON = "dlq_reason"
DLQ_OPERATOR = "dlq_operator"
KIND = "kind"
SUB = "sub"
MISSED = "missed"
WINDOW_START = "window_start"
WINDOW_KEY = "window_key"

KIND_OUTPUT = "out"
KIND_STATS = "stats"
#: A document a stage dropped, kept only so the window operator still sees its event time:
#: Atlas's watermark comes from the source, so filtered documents advance it too.
KIND_TICK = "tick"

FRAME_COLUMNS = (
    PART,
    SEQ,
    SUB,
    EVENT_MS,
    DOC,
    META,
    DLQ_REASON,
    DLQ_OPERATOR,
    KIND,
    MISSED,
    WINDOW_START,
    WINDOW_KEY,
)


_TEMP_COUNTER = itertools.count()
_BARRIER = "__filter_barrier__"


def filter_rows(df: DataFrame, keep: Column) -> DataFrame:
    """`df.where(keep)` that Spark's optimizer cannot push below the current projection.

    Predicate pushdown substitutes every projected column by its defining expression; over a
    chain of materialised MQL subexpressions that is exponential (measured: the driver ran out
    of memory planning a one-operator `$match`). A projection holding a non-deterministic
    column is a barrier pushdown does not cross, so the filter evaluates the materialised
    columns instead of their definitions.

    The barrier is `spark_partition_id()`, not `rand(seed)`: Structured Streaming gives every
    random seed a new value each micro-batch, and the seed is a literal in the generated code,
    so a `rand` barrier made Spark compile that code again (Janino) in every batch.
    """
    fenced = df.withColumns({"__keep__": keep, _BARRIER: F.spark_partition_id()})
    # The filter must reference the barrier (in a way the optimizer cannot fold away), or
    # column pruning removes it first.
    kept = fenced.where(F.col("__keep__") & (F.col(_BARRIER) >= 0))
    return kept.drop("__keep__", _BARRIER)


def failure_reason(operator: str, error: Column) -> Column:
    """Atlas's DLQ reason for an expression error in a stateless operator (§3.3)."""
    return F.concat(F.lit(f"Failed to process input document in {operator} with error: "), error)


@dataclass(frozen=True)
class Unstamped:
    """The source's frame before it stamped its documents with `tsFieldName` (the event time)
    and `streamMetaFieldName` (the stream metadata), and those names (`ingest`)."""

    df: DataFrame
    ts_field: str
    meta_field: str


@dataclass(frozen=True)
class StreamFrame:
    """A DataFrame of documents in flight, with the columns described in the module doc."""

    df: DataFrame
    #: Only on the frame a source produced (every stage makes a new frame without it): the
    #: same rows with their documents not yet stamped. A window right after the source may
    #: read those instead and stamp only the few documents it sends to the DLQ
    #: (`runtime.stamp`): stamping every document cost more than the window's own columns.
    unstamped: Unstamped | None = None

    @property
    def healthy(self) -> Column:
        """True for document rows that have not failed (stats rows are never healthy)."""
        return F.col(DLQ_REASON).isNull() & (F.col(KIND) == KIND_OUTPUT)

    def scope(self) -> Scope:
        """A fresh expression scope over the current document, collecting bindings."""
        return Scope.for_document(F.col(DOC), F.col(META), bindings=Bindings())

    def prepared(self, scope: Scope) -> StreamFrame:
        """Materialise the scope's shared subexpressions as columns (see `Scope.bind`)."""
        return StreamFrame(apply_bindings(self.df, scope.bindings))

    def finished(self, scope: Scope) -> StreamFrame:
        """Drop the scope's temporary columns."""
        return StreamFrame(drop_bindings(self.df, scope.bindings))

    def with_doc(self, result: Expr, *, operator: str) -> StreamFrame:
        """Replace the document of healthy rows by `result`, or fail them on error."""
        return self._with(DOC, result, operator=operator)

    def with_meta(self, result: Expr, *, operator: str) -> StreamFrame:
        """Replace the stream metadata of healthy rows by `result`, or fail them on error."""
        return self._with(META, result, operator=operator)

    def _with(self, column: str, result: Expr, *, operator: str) -> StreamFrame:
        frame, (value, error) = self._materialized(result.value, result.error_or_null())
        ok = frame.healthy & error.isNull()
        fails = frame.healthy & error.isNotNull()
        df = frame.df.withColumns(
            {
                column: F.when(ok, value).otherwise(F.col(column)),
                DLQ_REASON: F.when(fails, failure_reason(operator, error)).otherwise(
                    F.col(DLQ_REASON)
                ),
                DLQ_OPERATOR: F.when(fails, F.lit(operator)).otherwise(F.col(DLQ_OPERATOR)),
            }
        )
        return StreamFrame(df.drop(value, error))

    def where(self, predicate: Predicate, *, operator: str, keep_ticks: bool) -> StreamFrame:
        """Keep healthy rows matching `predicate` (failed rows always pass through).

        With `keep_ticks` (a window stage follows) dropped rows become `tick` rows instead of
        disappearing, so they still advance the window's watermark.
        """
        frame, (condition, error) = self._materialized(
            predicate.condition,
            predicate.error if predicate.error is not None else F.lit(None).cast("string"),
        )
        if predicate.error is not None:
            frame = frame.fail(error.isNotNull(), failure_reason(operator, error), operator)
        kept = frame.drop_where(~condition, keep_ticks=keep_ticks)
        return StreamFrame(kept.df.drop(condition, error))

    def drop_where(self, condition: Column, *, keep_ticks: bool) -> StreamFrame:
        """Drop healthy rows where `condition` holds (or turn them into ticks)."""
        frame, (dropped,) = self._materialized(self.healthy & condition)
        if not keep_ticks:
            return StreamFrame(filter_rows(frame.df, ~dropped).drop(dropped))
        df = frame.df.withColumns(
            {
                KIND: F.when(dropped, F.lit(KIND_TICK)).otherwise(F.col(KIND)),
                DOC: F.when(dropped, F.lit(None).cast("variant")).otherwise(F.col(DOC)),
            }
        )
        return StreamFrame(df.drop(dropped))

    def fail(self, condition: Column, reason: Column, operator: str) -> StreamFrame:
        """Send healthy rows where `condition` holds to the DLQ with `reason`."""
        frame, (fails, why) = self._materialized(self.healthy & condition, reason)
        df = frame.df.withColumns(
            {
                DLQ_REASON: F.when(fails, why).otherwise(F.col(DLQ_REASON)),
                DLQ_OPERATOR: F.when(fails, F.lit(operator)).otherwise(F.col(DLQ_OPERATOR)),
            }
        )
        return StreamFrame(df.drop(fails, why))

    def _materialized(self, *columns: Column) -> tuple[StreamFrame, tuple[Column, ...]]:
        """Add `columns` as temporary columns and return references to them.

        A column used more than once below is computed once: Spark's CollapseProject does not
        re-inline an expensive expression referenced several times, while repeating the
        expression itself would duplicate it in the generated code.
        """
        names = [f"__frame{next(_TEMP_COUNTER)}__" for _ in columns]
        df = self.df.withColumns(dict(zip(names, columns, strict=True)))
        return StreamFrame(df), tuple(F.col(name) for name in names)
