"""A compiled pipeline's streaming query with a test's own batch writer in place of the service's.

Tests that look at what each micro-batch carries (input counts, operator stats, throttling)
start the query the way the Spark engine does, with `foreach_batch` and the batch's input
metrics, but hand every batch to a recorder of their own; they drive the batches themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipeline_stages._engine.observed import InputMetrics
from pipeline_stages._engine.session import start_query


def start_recorded_query(
    spark: Any,
    compiled: Any,
    writer: Any,
    *,
    name: str,
    checkpoint: Path,
    state_dir: str | None = None,
    prepare: Callable[[Any], None] | None = None,
) -> tuple[Any, Any]:
    """`(query, sink)`: the started query named `name` writing to `writer`, and its
    `foreachBatch` sink (close it after stopping the query); `prepare` gets the sink before
    the query starts."""
    sink = compiled.foreach_batch(
        writer, processor="p", state_dir=state_dir, input_counts=InputMetrics(spark, name)
    )
    if prepare is not None:
        prepare(sink)
    writer = (
        compiled.envelopes.writeStream.queryName(name)
        .foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
    )
    # As the engine starts it: a window query with processing-time timeouts in its plan would,
    # with Spark's default, run micro-batches without input forever, so that
    # `processAllAvailable` never returns (`session.start_query`).
    query = start_query(
        writer,
        spark,
        idle_batches=compiled.runs_when_idle,
        state_partitions=compiled.state_partitions,
    )
    return query, sink
