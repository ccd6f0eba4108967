"""What a stage's `compile` needs besides its spec: the session, the processor, connections."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from pipeline_stages._base import ProblemCollector
from pipeline_stages._stream.frame import StreamFrame

#: The data source option carrying a pipeline's `$throttle` limits to its source's reader
#: (`_connectors.sources.throttled`): a JSON array of `{messagesPerSec, bytesPerSec}`.
THROTTLE_OPTION = "throttle"


@dataclass(frozen=True)
class ConnectionInfo:
    """A registered connection as the compiler sees it (secrets included: never log this)."""

    name: str
    type: str
    config: Mapping[str, Any] = field(default_factory=dict)


#: Connections every Sluice installation has.
BUILTIN_CONNECTIONS: dict[str, ConnectionInfo] = {
    "sample_stream_solar": ConnectionInfo("sample_stream_solar", "Sample"),
    "local": ConnectionInfo("local", "Local"),
}


@dataclass
class CompileContext:
    """Shared by the stages of one pipeline while it is compiled."""

    spark: SparkSession
    processor_name: str
    problems: ProblemCollector
    has_dlq: bool = False
    connections: Mapping[str, ConnectionInfo] = field(default_factory=dict)
    #: Overrides of the `documents` source batch size (`sluice process --batch-size`).
    batch_size: int | None = None
    #: The `documents` source's batch size when neither `batch_size` nor the pipeline's
    #: `config.batchSize` gives one: None keeps Atlas's one document per micro-batch; 0 means
    #: every document in the first micro-batch (`sluice process`).
    documents_batch_default: int | None = None
    #: Where file-backed sources and spools live.
    data_dir: str = ".sluice"
    #: A directory a `documents` array read in one micro-batch may be written to, for Spark's
    #: own file source to read (`sources.documents.file_stream`: no Python process to start
    #: before the first batch). Only for runs that never resume (`sluice process`), which
    #: delete it; None: the `documents` source.
    documents_dir: str | None = None
    #: Test hook: the wall-clock base (ms) the documents source stamps documents with.
    base_time_ms: int | None = None
    #: Set while compiling stages that precede a window stage: filtered documents must then
    #: stay in the stream as ticks so they still advance the watermark.
    window_ahead: bool = False
    #: The window engine of the checkpoint being run (`service.runtime.window_pins`); None: the
    #: Spark conf `spark.sluice.window.engine` decides.
    window_engine: str | None = None
    #: The window operator's bucket count of the checkpoint being run (`service.runtime.window_pins`);
    #: None: the Spark conf `spark.sluice.window.buckets` decides.
    window_buckets: int | None = None
    #: Whether the checkpoint being run has the window operator's processing-time timeouts
    #: (`service.runtime.window_pins`); None: a new checkpoint, which has them only when a
    #: wall-clock rule needs them (`OperatorSpec.runs_when_idle`).
    window_timers: bool | None = None
    #: Opens a connection's collections on an executor for `$lookup`/`$cachedLookup` (a
    #: picklable `_connectors.ports.LookupStores` the runner provides); None: no lookups.
    lookup_stores: Any = None
    #: The `$throttle` option of the source's reader (`sources.throttled.encode_limits` of
    #: every `$throttle` in the pipeline), set before `$source` compiles; None: no throttle.
    throttle: str | None = None
    #: The kind of source the pipeline reads, set by `plan.compile_pipeline` before `$source`
    #: compiles (`documents` or a connection type); None: the source was compiled elsewhere
    #: (tests' scripted sources), which `$throttle` cannot reach.
    source_kind: str | None = None
    #: Set once a window stage is compiled: the stages after it see its results.
    after_window: bool = False
    #: How many tasks the File and HTTP-ingest sources may cut a micro-batch into (Kafka: how
    #: many a partition's backlog), set by `plan.compile_pipeline` before `$source` compiles;
    #: None: the session's task slots (`sources.raw_source.read_tasks`).
    source_tasks: int | None = None

    def read_stream(self) -> Any:
        """`spark.readStream`, carrying the pipeline's `$throttle` to Sluice's source readers
        (`sources.raw_source.RawRecordSource.streamReader` applies it)."""
        reader = self.spark.readStream
        if self.throttle is not None:
            reader = reader.option(THROTTLE_OPTION, self.throttle)
        return reader

    def connection(self, name: str) -> ConnectionInfo | None:
        """Look a connection up, built-ins included."""
        return self.connections.get(name) or BUILTIN_CONNECTIONS.get(name)


@dataclass(frozen=True)
class SourcePlan:
    """The compiled `$source`: the frame and, for finite sources, how many records it has."""

    frame: StreamFrame
    finite_total: int | None = None
    source_type: str = "generated"
    #: Partition count of a partitioned source (Kafka, one topic), for per-partition
    #: watermarks (§4.6); None when unknown or unpartitioned (see `plan._window_source`).
    partitions: int | None = None


@dataclass(frozen=True)
class WindowPlan:
    """The compiled window stage: envelopes (results, late DLQ records, stats)."""

    envelopes: DataFrame
    #: True when windows can close without new input (idleTimeout, processing time).
    closes_on_clock: bool = False
    #: True when panes fire on the wall clock (`every` triggers): the operator's stats say
    #: when the next one is due (`nextPaneDue`).
    fires_panes_on_clock: bool = False
    #: True when the operator must be able to run in micro-batches without input (a wall-clock
    #: rule, partition idleness included: `OperatorSpec.runs_when_idle`).
    runs_when_idle: bool = False
    #: The shuffle partitions the window operator's state needs in a new checkpoint: 1 when
    #: all its rows go to one bucket (`OperatorSpec.splits_groups` is false), else the fewest
    #: over which the buckets land in different partitions (`spark.state_partitions`); None:
    #: the session's. Spark calls the operator's Python function once per partition and
    #: batch, empty ones included (`plan.CompiledPipeline.state_partitions`).
    state_partitions: int | None = None
    #: Whether the window operator's query has processing-time timeouts (to record for the
    #: checkpoint: `CompileContext.window_timers`); None: no operator state (test clocks).
    operator_timers: bool | None = None
