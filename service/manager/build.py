"""Building a processor run: its writer (DLQ, sample buffer, stats), checkpoint and request."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.config.settings import Settings
from service.manager.connections import ConnectionRegistry
from service.manager.dlq import DlqTargets
from service.manager.positions import pin_start_positions
from service.manager.runs import Run
from service.manager.stats import LiveStats
from service.manager.validate import Definition
from service.manager.writers import DlqWriter, ProcessorWriter, SampleBuffer
from service.runtime.engine import CompileRequest, RunRequest
from service.runtime.locks import CheckpointLock
from service.runtime.sink_resources import (
    ClusterClients,
    StoreSinkResources,
    build_run_partition_sink,
    executors_on_this_host,
)
from service.stores import DocumentStore, ProcessorRecord, Spool, StatsLedger, StatsStore


def dlq_option(options: Mapping[str, Any]) -> dict[str, str] | None:
    """`options.dlq` of a processor, or None."""
    dlq = options.get("dlq")
    return dict(dlq) if isinstance(dlq, Mapping) and dlq else None


class RunFactory:
    """Knows where a processor's checkpoint and sample buffer are, and builds its runs."""

    def __init__(
        self,
        settings: Settings,
        *,
        connections: ConnectionRegistry,
        dlq_targets: DlqTargets,
        documents: DocumentStore,
        stats: StatsStore,
        input_from_progress: bool = False,
    ) -> None:
        self._settings = settings
        self._connections = connections
        self._dlq_targets = dlq_targets
        self._documents = documents
        self._stats = stats
        #: The engine does not hand each batch's input counts to the writer.
        self._input_from_progress = input_from_progress
        self._spool = Spool(settings.data_dir)
        self._samples: dict[str, SampleBuffer] = {}
        #: `Cluster` clients of `$merge`/`$emit` sinks, shared by every run.
        self.sink_clients = ClusterClients()
        self._lock = threading.Lock()

    def checkpoint(self, record: ProcessorRecord) -> Path:
        """`<checkpoint root>/<id>/g<generation>`: ids, never names, steer paths."""
        return self._settings.checkpoint_root / record.id / f"g{record.generation}"

    def processor_dir(self, record: ProcessorRecord) -> Path:
        """Every checkpoint generation and the lock file of a processor."""
        return self._settings.checkpoint_root / record.id

    def sample(self, record: ProcessorRecord) -> SampleBuffer:
        """The processor's sample buffer (one per processor: it mirrors recent messages)."""
        with self._lock:
            buffer = self._samples.get(record.id)
            if buffer is None:
                buffer = SampleBuffer(
                    self._documents, record.id, capacity=self._settings.sample_size
                )
                self._samples[record.id] = buffer
            return buffer

    def forget(self, record: ProcessorRecord) -> None:
        """Drop the processor's sample buffer (the processor was dropped)."""
        with self._lock:
            buffer = self._samples.pop(record.id, None)
        (buffer or self.sample_for_drop(record)).drop()

    def sample_for_drop(self, record: ProcessorRecord) -> SampleBuffer:
        """A buffer object for deleting a collection nobody mirrors."""
        return SampleBuffer(self._documents, record.id, capacity=self._settings.sample_size)

    def new_stats(self, record: ProcessorRecord) -> LiveStats:
        """The processor's live stats, from its ledger, recording each batch in it."""
        processor_id = record.id
        store = self._stats

        def record_batch(
            lane: str,
            generation: int,
            batch_id: int,
            part: Mapping[str, Any],
            seed: Mapping[str, Any] | None,
        ) -> StatsLedger:
            return store.record(processor_id, lane, generation, batch_id, part, seed=seed)

        return LiveStats(
            record.stats,
            generation=record.generation,
            ledger=store.get(record.id),
            recorder=record_batch,
            input_from_progress=self._input_from_progress,
        )

    def new_run(self, record: ProcessorRecord, definition: Definition) -> Run:
        """A run of the processor (not launched yet)."""
        stats = self.new_stats(record)
        option = dlq_option(record.options)
        dlq = None
        if self._dlq_targets.target_of(option) is not None:
            dlq = DlqWriter(
                lambda: self._dlq_targets.open(option),
                processor=record.name,
                instance=self._settings.instance_name,
            )
        connections = pin_start_positions(
            definition.pipeline,
            self._connections.for_engine(),
            checkpoint_dir=self.checkpoint(record),
            spool=self._spool,
        )
        resources = StoreSinkResources(
            local=self._documents, connections=connections, clients=self.sink_clients
        )
        # The run tag names File sink batches: stable per checkpoint (a replay rewrites the
        # same file), new for a fresh checkpoint (whose batch ids restart at 0).
        sink = build_run_partition_sink(
            definition.parsed,
            resources,
            processor=record.name,
            run_tag=f"{record.id}-g{record.generation:06d}",
            executors_on_this_host=executors_on_this_host(self._settings.spark_master),
        )
        writer = ProcessorWriter(
            generation=record.generation,
            stats=stats,
            sample=self.sample(record),
            dlq=dlq,
            sink=sink,
        )
        request = RunRequest(
            compile=CompileRequest(
                record.name, definition.pipeline, definition.has_dlq, connections
            ),
            processor_id=record.id,
            checkpoint_dir=self.checkpoint(record),
            writer=writer,
        )
        lock = CheckpointLock(self.processor_dir(record))
        return Run(record.id, record.name, record.generation, stats, lock, request)
