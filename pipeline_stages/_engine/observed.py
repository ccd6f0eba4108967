"""The source's input counts of the micro-batch in progress, read inside `foreachBatch`.

Each query counts the records and bytes its source reads under an observed metric
(`INPUT_METRICS`, `Dataset.observe` in `pipeline_stages/source.py`). Spark reports the metric
in the batch's progress event, but only after it has committed the batch, so counts taken from
there are lost when the process dies between the commit and the event (or before they are
persisted). The metric's value is known earlier: the batch's rows have been computed once the
sink has collected them, and the query's current execution (`StreamExecution.lastExecution`,
the batch's `IncrementalExecution`) holds it. `InputMetrics` reads it there, so the writer can
persist the batch's input counts with its outputs, before the commit.

The batch's `$throttle` figures (`throttledTimeMs`, `throttleEvents`) come along: the source's
reader wrote them into the batch's end offset (`_connectors/sources/throttled.py`), which
Spark's offset log holds before the batch runs.

This reaches into Spark's JVM objects (`lastExecution().observedMetrics()`, stable since
Spark 3.0 and checked by `tests/integration/test_sinks.py`). When that fails it logs once and
returns None: the writer then has no input counts for the batch, and says so in the log.

The batch window engine runs the stages after a window as a batch job of its own, per
micro-batch (`BatchWindow.fold`); the enrichment stages there observe their metrics in that
job, which the query's execution never sees. `job_operators` reads them from the job's own
execution (`Dataset.queryExecution().observedMetrics()`, filled once the job has run), and the
sink records them with the micro-batch (`BatchResult.operators`).
"""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import SparkSession

from pipeline_stages._connectors.sources.rate_limit import throttle_figures
from pipeline_stages._enrichment.operator_stats import METRIC_PREFIX, operator_counts
from pipeline_stages._stream.batch import INPUT_METRICS

log = logging.getLogger("sluice.engine")


def _operator_rows(metrics: Any) -> dict[str, dict[str, Any]]:
    """The operator stats metrics (`_enrichment.operator_stats`) of a Scala map of rows."""
    rows: dict[str, dict[str, Any]] = {}
    keys = metrics.keysIterator()
    while keys.hasNext():
        name = str(keys.next())
        if name.startswith(METRIC_PREFIX):
            row = metrics.apply(name)
            rows[name] = {str(f): row.getAs(str(f)) for f in row.schema().fieldNames()}
    return rows


def job_operators(df: Any) -> dict[str, dict[str, Any]]:
    """The operator stats (`_enrichment.operator_stats`) a batch DataFrame's job observed,
    read after the job ran (`collect`); {} when none, or when they cannot be read (logged:
    stats must never fail a batch)."""
    try:
        return operator_counts(_operator_rows(df._jdf.queryExecution().observedMetrics()))
    except Exception as error:  # noqa: BLE001 - stats must never fail a batch
        log.warning("cannot read the operator stats of the stages after the window: %s", error)
        return {}


class InputMetrics:
    """Reads `INPUT_METRICS` of the running query named `query_name` for the batch in progress.

    Args:
        spark: The session the query was started from (a `foreachBatch` DataFrame's own
            session is a clone that does not know the query).
        query_name: The query's name (`DataStreamWriter.queryName`).
    """

    def __init__(self, spark: SparkSession, query_name: str) -> None:
        self._spark = spark
        self.query_name = query_name
        self._execution_owner: Any = None
        self._warned = False

    def __call__(self, batch_id: int) -> dict[str, Any] | None:
        """`{"count", "bytes"}` of batch `batch_id` (call it after the batch's rows were
        computed), or None when they cannot be read."""
        try:
            return self._read(batch_id)
        except Exception as error:  # noqa: BLE001 - stats must never fail a batch
            self._warn(
                f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            )
            return None

    def _read(self, batch_id: int) -> dict[str, Any] | None:
        query = self._query()
        if query is None:
            self._warn("the query is not active")
            return None
        execution = query.lastExecution()
        if execution is None or int(execution.currentBatchId()) != batch_id:
            self._warn(f"the query's current execution is not batch {batch_id}")
            return None
        metrics = execution.observedMetrics()
        found = metrics.get(INPUT_METRICS)
        if not found.isDefined():
            self._warn(f"batch {batch_id} has no {INPUT_METRICS} metric")
            return None
        row = found.get()
        counts: dict[str, Any] = {
            "count": int(row.getAs("count") or 0),
            "bytes": int(row.getAs("bytes") or 0),
        }
        counts.update(self._throttle(query, batch_id))
        operators = operator_counts(_operator_rows(metrics))
        if operators:
            counts["operators"] = operators
        return counts

    def _throttle(self, query: Any, batch_id: int) -> dict[str, int]:
        """The `$throttle` figures the batch's end offset carries (`sources.throttled`), from
        Spark's offset log, which holds the batch's offsets before it runs; {} without any."""
        logged = query.offsetLog().get(batch_id)
        if not logged.isDefined():
            return {}
        offsets = logged.get().offsets()
        figures: dict[str, int] = {}
        for index in range(offsets.size()):
            offset = offsets.apply(index)
            if offset.isDefined():
                for key, value in throttle_figures(str(offset.get().json())).items():
                    figures[key] = figures.get(key, 0) + value
        return figures

    def _query(self) -> Any:
        if self._execution_owner is None:
            for query in self._spark._jsparkSession.streams().active():
                if query.name() == self.query_name:
                    self._execution_owner = query.streamingQuery()
                    break
        return self._execution_owner

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "query %s: cannot read the input counts inside the batch (%s); input stats of "
                "such batches are missing",
                self.query_name,
                why,
            )
