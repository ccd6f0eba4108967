"""Assembling a run: what the service's engine and `sluice process` both build to run a pipeline.

A run is a compiled pipeline (`compile_run`) plus the writer its sink needs
(`sink_resources.build_run_sink`). The service's engine adds a checkpoint, pinned start
positions and a supervised query; `sluice process` adds a temporary checkpoint and stdout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pipeline_stages import ParsedPipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._stream.context import CompileContext, ConnectionInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipeline_stages._engine.plan import CompiledPipeline


def compile_context(
    spark: SparkSession,
    *,
    processor: str,
    connections: Mapping[str, Any],
    has_dlq: bool,
    data_dir: str | None = None,
    batch_size: int | None = None,
    documents_batch_default: int | None = None,
    documents_dir: str | None = None,
    window_engine: str | None = None,
    window_buckets: int | None = None,
    window_timers: bool | None = None,
    lookup_stores: Any = None,
) -> CompileContext:
    """The compile context of one run; `connections` maps names to records with `name`,
    `type` and `config` (stored connection records or `ConnectionInfo`s)."""
    extra: dict[str, Any] = {} if data_dir is None else {"data_dir": data_dir}
    return CompileContext(
        spark=spark,
        processor_name=processor,
        problems=ProblemCollector(),
        has_dlq=has_dlq,
        batch_size=batch_size,
        documents_batch_default=documents_batch_default,
        documents_dir=documents_dir,
        connections={
            name: ConnectionInfo(c.name, c.type, dict(c.config)) for name, c in connections.items()
        },
        window_engine=window_engine,
        window_buckets=window_buckets,
        window_timers=window_timers,
        lookup_stores=lookup_stores,
        **extra,
    )


def compile_run(parsed: ParsedPipeline, ctx: CompileContext) -> CompiledPipeline:
    """Compile a parsed pipeline on `ctx`; raises `PipelineInvalid` with every problem."""
    # Spark-side modules load on the first compile, not when the service module is imported.
    from pipeline_stages._engine.plan import compile_pipeline

    return compile_pipeline(parsed, ctx)
