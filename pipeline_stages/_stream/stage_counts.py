"""Documents in and out of the stages that count nothing themselves (`$match`,
`$addFields`, ...), observed with the micro-batch.

Each such stage's input and output frames are observed under a metric named
`<METRIC_PREFIX><operator>:<stage path>:<counter>` (Spark's `Dataset.observe`), which the
engine reads inside the batch with the input counts (`_engine/observed.py`) and the stats add
up per operator (`operatorStats`). The main pipeline's stages (`_engine/plan.py`) and a
window's per-document stages, before and after its operator (`_windowing/spark`), are counted
the same way. The enrichment stages count more (latencies, cache hits) and observe their own
metrics (`_enrichment/operator_stats.py`).

Plain Python at import; Spark only inside the functions.
"""

from __future__ import annotations

from typing import Any

from pipeline_stages._entry import entry_of

#: Observed-metric names of operator stats start with this, then `<operator>:<stage path>`.
METRIC_PREFIX = "sluice_operator:"
#: Stages that observe their own counts (`_enrichment.operator_stats.observe_operator`).
SELF_COUNTING = frozenset({"$lookup", "$cachedLookup", "$https"})


def observe_count(df: Any, *, operator: str, path: str, healthy: Any, counter: str) -> Any:
    """`df` observed with its healthy documents counted as the operator's `counter`
    (`inputMessageCount` on a stage's input frame, `outputMessageCount` on its output)."""
    from pyspark.sql import functions as F

    total = F.coalesce(F.sum(F.when(healthy, 1).otherwise(0)), F.lit(0)).alias(counter)
    return df.observe(f"{METRIC_PREFIX}{operator}:{path}:{counter}", total)


def counted(frame: Any, *, operator: str, path: str, counter: str) -> Any:
    """The stream frame observed with its healthy documents counted as `counter`."""
    from pipeline_stages._stream.frame import StreamFrame

    df = observe_count(
        frame.df, operator=operator, path=path, healthy=frame.healthy, counter=counter
    )
    return StreamFrame(df)


def compile_counted(spec: Any, frame: Any, ctx: Any, path: str) -> Any:
    """The stage's `compile` on `frame`, its documents in and out counted when it has an
    operator name and counts nothing itself."""
    entry = entry_of(spec)
    operator = entry.operator_name
    if not operator or entry.key in SELF_COUNTING:
        return entry.module.compile(spec, frame, ctx, path)
    frame = counted(frame, operator=operator, path=path, counter="inputMessageCount")
    out = entry.module.compile(spec, frame, ctx, path)
    return counted(out, operator=operator, path=path, counter="outputMessageCount")
