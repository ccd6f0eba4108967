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


def failure_reason(operator: str, error: Column) -> Column:
    """Atlas's DLQ reason for an expression error in a stateless operator (§3.3)."""
    return F.concat(F.lit(f"Failed to process input document in {operator} with error: "), error)


@dataclass(frozen=True)
class StreamFrame:
    """A DataFrame of documents in flight, with the columns described in the module doc."""

    df: DataFrame

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
        if result.error is None:
            updated = F.when(self.healthy, result.value).otherwise(F.col(column))
            return StreamFrame(self.df.withColumn(column, updated))
        fails = self.healthy & result.error.isNotNull()
        df = self.df.withColumns(
            {
                column: F.when(self.healthy & result.error.isNull(), result.value).otherwise(
                    F.col(column)
                ),
                DLQ_REASON: F.when(fails, failure_reason(operator, result.error)).otherwise(
                    F.col(DLQ_REASON)
                ),
                DLQ_OPERATOR: F.when(fails, F.lit(operator)).otherwise(F.col(DLQ_OPERATOR)),
            }
        )
        return StreamFrame(df)

    def where(self, predicate: Predicate, *, operator: str) -> StreamFrame:
        """Keep healthy rows matching `predicate` (failed rows always pass through)."""
        frame = self
        if predicate.error is not None:
            fails = self.healthy & predicate.error.isNotNull()
            frame = self.fail(fails, failure_reason(operator, predicate.error), operator)
        return StreamFrame(frame.df.where(~frame.healthy | predicate.condition))

    def fail(self, condition: Column, reason: Column, operator: str) -> StreamFrame:
        """Send healthy rows where `condition` holds to the DLQ with `reason`."""
        fails = self.healthy & condition
        df = self.df.withColumns(
            {
                DLQ_REASON: F.when(fails, reason).otherwise(F.col(DLQ_REASON)),
                DLQ_OPERATOR: F.when(fails, F.lit(operator)).otherwise(F.col(DLQ_OPERATOR)),
            }
        )
        return StreamFrame(df)
