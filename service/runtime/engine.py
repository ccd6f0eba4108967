"""What the processor manager needs from an execution engine.

The manager owns lifecycle and bookkeeping; an `Engine` turns one processor run into a
running query. `service.runtime.spark_engine.SparkEngine` is the implementation (one SparkSession
per service, one Structured Streaming query per started processor); the API and lifecycle
unit tests use an in-process stand-in (`tests/unit/service/fake_engine.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from threading import Event
from typing import Any, Protocol, TextIO

from pipeline_stages._base import Problem

#: `(query_id, progress)`: a finished micro-batch (`StreamingQueryProgress` as a dict).
ProgressCallback = Callable[[str, dict[str, Any]], None]


@dataclass(frozen=True)
class Connection:
    """A registered connection as the engine sees it (secrets included: never log this)."""

    name: str
    type: str
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CompileRequest:
    """Everything needed to compile a processor's pipeline."""

    name: str
    pipeline: Any
    has_dlq: bool
    connections: Mapping[str, Connection]


@dataclass(frozen=True)
class RunRequest:
    """Everything needed to run a processor: the pipeline, its checkpoint and its writer.

    Attributes:
        compile: What to compile.
        processor_id: The processor's id (names the query and the checkpoint directory).
        checkpoint_dir: The query's checkpoint location (one per processor generation).
        writer: The `BatchWriter` receiving every micro-batch (idempotent per batch id).
    """

    compile: CompileRequest
    processor_id: str
    checkpoint_dir: Path
    writer: Any


@dataclass(frozen=True)
class ProcessRequest:
    """An ephemeral run (`POST /pipelines:process`): what `sluice process` needs, with the
    service's connections and `local` store, and where its lines go.

    Attributes:
        name: The ephemeral processor's name (DLQ records carry it).
        pipeline: The pipeline, checked without Spark already.
        batch_size: Documents per micro-batch of a `documents` source (None: the pipeline's
            `config.batchSize`, else all at once).
        max_seconds: The longest the run may take.
        connections: The service's connections (secrets included: never log this).
        local_store: The `DocumentStore` of the `local` connection.
        store_url: The URL of that store (what executors open for lookups).
        out: Where output lines go (as `sluice process` prints them on stdout).
        err: Where problems, errors and warnings go (its stderr).
        cancel: Set when nobody reads any more: the run stops.
    """

    name: str
    pipeline: Any
    batch_size: int | None
    max_seconds: float
    connections: Mapping[str, Connection]
    local_store: Any
    store_url: str
    out: TextIO
    err: TextIO
    cancel: Event


class QueryHandle(Protocol):
    """A running query."""

    query_id: str
    #: The name Spark's UI and log show for the query.
    query_name: str

    def is_active(self) -> bool:
        """Whether the query is still running."""
        ...

    def failure(self) -> str | None:
        """Why the query terminated (None while it runs or after a clean stop)."""
        ...

    def stop(self) -> None:
        """Stop the query and wait for it (idempotent)."""
        ...


class Engine(Protocol):
    """An execution engine (see the module docstring)."""

    @property
    def state(self) -> str:
        """`stopped`, `starting`, `ready` or `failed`."""
        ...

    @property
    def batch_input_metrics(self) -> bool:
        """Whether the writer gets each batch's source input counts with the batch
        (`BatchResult.input`); otherwise stats count input from progress reports."""
        ...

    def start(self) -> None:
        """Begin starting in the background (idempotent)."""
        ...

    def set_progress_callback(self, callback: ProgressCallback) -> None:
        """Receive every query's progress."""
        ...

    def check(self, request: CompileRequest) -> list[Problem]:
        """Compile without running; return warnings, raise `PipelineInvalid` on problems."""
        ...

    def launch(self, request: RunRequest) -> QueryHandle:
        """Compile and start a query; raise `PipelineInvalid` on compile problems."""
        ...

    def driver_ids(self) -> dict[str, int]:
        """`{"pid": <driver pid>, "jvmPid": <JVM pid>}` for checkpoint lock files."""
        ...

    def ready(self) -> None:
        """Wait for the engine to start; raise `EngineUnavailable` when it cannot."""
        ...

    def process(self, request: ProcessRequest) -> int:
        """Run a pipeline ephemerally as `sluice process` does, printing to `request.out` and
        `request.err`, until it ends or `request.cancel` is set; returns its exit code."""
        ...

    def shutdown(self) -> None:
        """Stop everything (queries are stopped by the manager first)."""
        ...
