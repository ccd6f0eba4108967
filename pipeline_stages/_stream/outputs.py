"""One partition's output documents, as columns, for the sinks that write on the executors.

A partition of a micro-batch reaches its sink as Arrow columns (`_engine.partitions`); most
sinks need only the documents' JSON text, so the per-document `Output` objects (with their
deterministic keys, a SHA-256 each) are made only when a sink asks for them (`outputs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

import pyarrow as pa

from pipeline_stages._stream.batch import Output, SinkRequests, object_id, sink_target


class PartitionOutputs:
    """The output envelopes of one partition (or of a whole batch on the driver), in the
    order they arrived, over an Arrow table with the envelope's columns (`_stream.envelope`).
    Each column becomes Python values only when a sink reads it."""

    def __init__(self, processor: str, table: pa.Table) -> None:
        self.processor = processor
        self.table = table
        self._outputs: list[Output] | None = None

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def _column(self, name: str) -> list[Any]:
        return list(self.table.column(name).to_pylist())

    @cached_property
    def docs(self) -> list[str]:
        """The documents' JSON text."""
        return self._column("doc")

    @cached_property
    def metas(self) -> list[str | None]:
        """The envelopes' metadata (JSON text; computed sink targets travel there)."""
        return self._column("meta")

    @cached_property
    def _positions(self) -> tuple[list[Any], ...]:
        return tuple(
            self._column(name) for name in ("part", "seq", "sub", "window_start", "window_key")
        )

    def key(self, index: int) -> str:
        """The deterministic key of document `index` (`_stream.batch.output_key`)."""
        part, seq, sub, window_start, window_key = (c[index] for c in self._positions)
        if window_start is not None:
            return object_id(self.processor, "w", window_start, window_key)
        return object_id(self.processor, "d", part, seq, sub)

    def target(self, index: int) -> dict[str, Any] | None:
        """The sink target names computed for document `index` (None for literal targets)."""
        return sink_target(self.metas[index])

    def outputs(self) -> list[Output]:
        """Every document as an `Output` (made once, on first use)."""
        if self._outputs is None:
            self._outputs = [
                Output(doc, self.key(i), self.target(i)) for i, doc in enumerate(self.docs)
            ]
        return self._outputs

    def position(self, index: int) -> tuple[int, int, int]:
        """`(seq, part, sub)` of document `index`: its place in the batch's emission order."""
        part, seq, sub = (c[index] for c in self._positions[:3])
        return (seq or 0, part or 0, sub or 0)


@dataclass
class PartitionWrite:
    """What a sink did with one partition's outputs.

    Attributes:
        failures: `(output index, DLQ record)` for each document it did not write, in
            output order.
        staged: Files written to a staging place, for the driver to publish: `(directory,
            staged path)` (the File sink; see `sinks.partitioned`).
        requests: The requests a per-document request sink made (its operator's stats).
    """

    failures: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    staged: list[tuple[str, str]] = field(default_factory=list)
    requests: SinkRequests | None = None


class PartitionSink(Protocol):
    """A sink that writes each partition of a micro-batch where the partition is (a picklable
    object: Spark ships it to the executors), and finishes the batch on the driver.

    Attributes:
        on_executors: Whether executors can reach the sink's target (False: the partitions
            are written in the driver, e.g. `local` behind a remote Spark cluster).
    """

    on_executors: bool

    def write_partition(
        self, batch_id: int, partition: int, attempt: int, outputs: PartitionOutputs
    ) -> PartitionWrite:
        """Write one partition's outputs (idempotent per batch id and document)."""
        ...

    def publish(self, batch_id: int, staged: list[tuple[str, str]]) -> None:
        """On the driver, once every partition is written: make the batch visible."""
        ...

    def close(self) -> None:
        """Release what the driver-side object holds."""
        ...
