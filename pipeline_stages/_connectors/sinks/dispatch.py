"""From a sink plan to its writer, and the writer every runner chains after its own.

`build_sink_writer` picks the writer for a plan; the runner supplies `SinkResources` (how
to reach the embedded store and the registered connections: `service.runtime.sink_resources`).
`SinkWriter.write` returns the DLQ records of documents it could not write, which the runner
adds to the batch's DLQ records (so they are stored, sampled and counted like any other).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from pipeline_stages._connectors.sinks import kafka
from pipeline_stages._connectors.sinks.collection_writer import CollectionEmitWriter
from pipeline_stages._connectors.sinks.file_writer import FileEmitWriter
from pipeline_stages._connectors.sinks.https_writer import HttpsSinkPlan, HttpsSinkWriter
from pipeline_stages._connectors.sinks.ids import unwritten_outputs
from pipeline_stages._connectors.sinks.merge_writer import MergeWriter
from pipeline_stages._connectors.sinks.plans import (
    CollectionEmitPlan,
    FileEmitPlan,
    KafkaEmitPlan,
    MergePlan,
)
from pipeline_stages._stream.batch import BatchResult, SinkRequests
from pipeline_stages._stream.context import ConnectionInfo
from pipeline_stages._stream.envelope import KIND_DLQ


class SinkWriter(Protocol):
    """Writes a micro-batch's outputs to the sink (idempotent per batch id)."""

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Write the outputs; return DLQ records for the documents not written."""
        ...


class SinkResources(Protocol):
    """What writers need from their runner (stores are opened lazily, inside a batch)."""

    def connection(self, name: str) -> ConnectionInfo | None:
        """A registered connection (secrets included), built-ins too."""
        ...

    def documents(self, connection: str) -> Any:
        """The `DocumentStore` of `local` or of a `Cluster` connection."""
        ...

    def mongo_client(self, connection: str) -> Any:
        """The pymongo client of a `Cluster` connection."""
        ...


def build_sink_writer(
    plan: Any, resources: SinkResources, *, processor: str, run_tag: str
) -> SinkWriter:
    """The writer for a compiled sink plan.

    Raises:
        ValueError: For a plan of an unknown kind or a File connection without a directory.
    """
    if isinstance(plan, MergePlan):
        return MergeWriter(
            plan,
            open_store=_opener(resources.documents, plan.connection),
            processor=processor,
            embedded=plan.connection_type == "Local",
        )
    if isinstance(plan, FileEmitPlan):
        connection = resources.connection(plan.connection)
        root = (connection.config if connection else {}).get("directory")
        if not isinstance(root, str):
            raise ValueError(f"File connection {plan.connection!r} has no directory")
        return FileEmitWriter(plan, root=root, processor=processor, run_tag=run_tag)
    if isinstance(plan, CollectionEmitPlan):
        embedded = plan.connection_type == "Local"
        return CollectionEmitWriter(
            plan,
            open_store=_opener(resources.documents, plan.connection),
            open_client=None if embedded else _opener(resources.mongo_client, plan.connection),
            processor=processor,
            embedded=embedded,
        )
    if isinstance(plan, KafkaEmitPlan):
        return _kafka_writer(plan, resources, processor)
    if isinstance(plan, HttpsSinkPlan):
        return HttpsSinkWriter(plan, resources.connection(plan.connection), processor=processor)
    raise ValueError(f"unknown sink plan {type(plan).__name__}")


def _opener(open_: Callable[[str], Any], connection: str) -> Callable[[], Any]:
    return lambda: open_(connection)


class _KafkaAdapter:
    """The Kafka connector's writer behind the `SinkWriter` contract (DLQ list returned)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Produce the batch; the connector returns its DLQ records."""
        result = self._writer.write(batch)
        return list(result) if isinstance(result, list | tuple) else []

    def close(self) -> None:
        """Flush and drop the producer."""
        close = getattr(self._writer, "close", None)
        if close is not None:
            close()


def _kafka_writer(plan: KafkaEmitPlan, resources: SinkResources, processor: str) -> SinkWriter:
    connection = resources.connection(plan.connection)
    return _KafkaAdapter(kafka.KafkaEmitWriter(dict(plan.options), connection, processor))


def apply_sink(sink: SinkWriter | None, batch: BatchResult) -> set[int]:
    """Write the batch to `sink` and append its DLQ records to the batch (emission order);
    returns the indexes of the outputs it did not write (`ids.unwritten_outputs`)."""
    if sink is None:
        return set()
    records = sink.write(batch)
    for record in records:
        batch.order.append((KIND_DLQ, len(batch.dlq)))
        batch.dlq.append(record)
    return unwritten_outputs(batch.outputs, records)


def close_sink(sink: object) -> None:
    """Release what a writer holds (the Kafka producer); writers without `close` hold nothing."""
    close = getattr(sink, "close", None)
    if close is not None:
        close()


def sink_requests(sink: object) -> SinkRequests | None:
    """What a per-document request sink (`$https` as the last stage) did in its last write,
    for its operator's stats; None for every other writer."""
    requests = getattr(sink, "requests", None)
    return requests if isinstance(requests, SinkRequests) else None
