"""Sinks that write each partition of a micro-batch on the executor holding it, in bulk.

`build_partition_sink` gives the `PartitionSink` (`_stream.outputs`) of a plan; Spark pickles
it to the executors with the batch's task (`_engine.partitions`).

* `$emit` to files (`FilePartitionSink`): each partition writes its documents as one JSON-lines
  file per target directory into a hidden staging directory of that batch,
  `<dir>/.sluice-staging/<processor>-<run>-<batch id>/part-<partition>-<attempt>.jsonl`
  (fsynced), and reports the files it staged. Once every partition is written, the driver
  publishes the files the successful task attempts reported, in partition order, as
  `<processor>-<run>-<batch id>.jsonl` (one file) or `...-<batch id>-<k>.jsonl` (several),
  removes any other file of that batch id a previous attempt published (a replay may be
  partitioned differently), fsyncs the directory and deletes the staging directory (with
  what failed or duplicate task attempts left there). A replayed batch therefore leaves
  exactly one copy of each line, and a reader (the File source skips hidden names) never
  sees a partial file. Each distinct target directory is resolved once per partition.
* `$merge`, collection `$emit` and Kafka `$emit` (`WriterPartitionSink`): the connector's
  writer (`MergeWriter`, `CollectionEmitWriter`, `KafkaEmitWriter`) is built in the task
  from picklable resources the runner supplies (`local`'s SQLite file, a `Cluster` URI, a
  Kafka connection) and writes the partition's documents in one bulk call (one SQLite
  transaction, one unordered MongoDB bulk write per collection, one producer flushed per
  task). Their exactly-once rules (deterministic ids) do not depend on partitioning; two
  documents of one batch that target the same `_id` from different partitions are applied
  in no particular order (as with Atlas's `parallelism`).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._connectors.file_paths import PathEscapes, resolve_under
from pipeline_stages._connectors.sinks.dispatch import (
    SinkResources,
    build_sink_writer,
    close_sink,
    sink_requests,
)
from pipeline_stages._connectors.sinks.file_writer import SUFFIX, batch_file_name
from pipeline_stages._connectors.sinks.ids import effective_keys, failure_records, sink_record_id
from pipeline_stages._connectors.sinks.plans import FileEmitPlan, TargetError, resolve_name
from pipeline_stages._stream.batch import BatchResult, Output
from pipeline_stages._stream.outputs import PartitionOutputs, PartitionWrite

#: The hidden directory, in each target directory, where partitions stage a batch's files.
STAGING = ".sluice-staging"


def staging_dir(directory: str, base: str) -> str:
    """Where the partitions of batch `base` (`<processor>-<run>-<batch id>`) stage files."""
    return os.path.join(directory, STAGING, base)


def _fsync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class FilePartitionSink:
    """`$emit` to a File connection, written per partition (see the module docstring)."""

    plan: FileEmitPlan
    root: str
    processor: str
    run_tag: str
    on_executors: bool = True
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(tz=UTC), repr=False)

    def _base(self, batch_id: int) -> str:
        return batch_file_name(self.processor, self.run_tag, batch_id)[: -len(SUFFIX)]

    def write_partition(
        self, batch_id: int, partition: int, attempt: int, outputs: PartitionOutputs
    ) -> PartitionWrite:
        """Stage the partition's lines, one file per target directory."""
        groups: dict[str, list[str]] = {}
        failures: list[tuple[int, str]] = []
        literal = self.plan.path.literal
        if literal is not None:
            try:
                groups[resolve_under(self.root, literal)] = outputs.docs
            except PathEscapes as error:
                failures = [(i, str(error)) for i in range(len(outputs))]
        else:
            failures = self._group(outputs, groups)
        base = self._base(batch_id)
        staged = []
        for directory, docs in groups.items():
            staging = staging_dir(directory, base)
            os.makedirs(staging, exist_ok=True)
            path = os.path.join(staging, f"part-{partition:05d}-{attempt}{SUFFIX}")
            with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
                fh.write("\n".join(docs))
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
            staged.append((directory, path))
        return PartitionWrite(failures=self._records(outputs, failures), staged=staged)

    def _group(
        self, outputs: PartitionOutputs, groups: dict[str, list[str]]
    ) -> list[tuple[int, str]]:
        """Sort documents by their computed directory (each resolved once)."""
        failures: list[tuple[int, str]] = []
        resolved: dict[str, str | PathEscapes] = {}
        for index, doc in enumerate(outputs.docs):
            try:
                relative = resolve_name(self.plan.path, "path", outputs.target(index))
            except TargetError as error:
                failures.append((index, str(error)))
                continue
            if relative not in resolved:
                try:
                    resolved[relative] = resolve_under(self.root, relative)
                except PathEscapes as error:
                    resolved[relative] = error
            directory = resolved[relative]
            if isinstance(directory, PathEscapes):
                failures.append((index, str(directory)))
            else:
                groups.setdefault(directory, []).append(doc)
        return failures

    def _records(
        self, outputs: PartitionOutputs, failures: list[tuple[int, str]]
    ) -> list[tuple[int, dict[str, Any]]]:
        if not failures:
            return []
        found = outputs.outputs()
        records = failure_records(
            found,
            effective_keys(found),
            failures,
            operator=self.plan.operator,
            processor=self.processor,
            now=self.clock(),
        )
        return list(zip(sorted(index for index, _ in failures), records, strict=True))

    def publish(self, batch_id: int, staged: list[tuple[str, str]]) -> None:
        """Rename the staged files to their final names (see the module docstring)."""
        base = self._base(batch_id)
        of_batch = re.compile(re.escape(base) + r"(-\d{5})?" + re.escape(SUFFIX))
        by_directory: dict[str, list[str]] = {}
        for directory, path in staged:
            by_directory.setdefault(directory, []).append(path)
        for directory, paths in by_directory.items():
            paths.sort()  # partition order
            names = (
                [f"{base}{SUFFIX}"]
                if len(paths) == 1
                else [f"{base}-{k:05d}{SUFFIX}" for k in range(len(paths))]
            )
            earlier = [n for n in os.listdir(directory) if of_batch.fullmatch(n)]
            for path, name in zip(paths, names, strict=True):
                os.replace(path, os.path.join(directory, name))
            for stale in sorted(set(earlier) - set(names)):
                os.remove(os.path.join(directory, stale))
            _fsync_directory(directory)  # the renames must survive a crash, or a replay is skipped
            shutil.rmtree(staging_dir(directory, base), ignore_errors=True)
            try:
                os.rmdir(os.path.join(directory, STAGING))
            except OSError:
                pass  # another batch's staging is still there

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class WriterPartitionSink:
    """A connector's batch writer run per partition (see the module docstring).

    Attributes:
        make: Builds the writer (a picklable callable when `on_executors`).
        processor: The processor name (DLQ record ids).
    """

    make: Callable[[], Any]
    processor: str
    on_executors: bool = True

    def write_partition(
        self, batch_id: int, partition: int, attempt: int, outputs: PartitionOutputs
    ) -> PartitionWrite:
        """Write the partition's documents with one writer call (its ids do not depend on
        the partition); a writer that counts its requests (`requests`) reports them."""
        del partition, attempt
        writer = self.make()
        found = outputs.outputs()
        try:
            records = writer.write(BatchResult(batch_id=batch_id, outputs=found))
        finally:
            close_sink(writer)
        return PartitionWrite(
            failures=_paired(found, list(records or []), self.processor),
            requests=sink_requests(writer),
        )

    def publish(self, batch_id: int, staged: list[tuple[str, str]]) -> None:
        """Nothing to publish: every partition wrote its documents."""

    def close(self) -> None:
        """Nothing to release (each task closes its writer)."""


def _paired(
    outputs: list[Output], records: list[dict[str, Any]], processor: str
) -> list[tuple[int, dict[str, Any]]]:
    """Each sink DLQ record with the index of the output it stands for."""
    if not records:
        return []
    operators = {str(r.get("operatorName")) for r in records}
    index_of = {
        sink_record_id(processor, operator, key): index
        for index, key in enumerate(effective_keys(outputs))
        for operator in operators
    }
    paired = []
    for record in records:
        record_id = record.get("_id")
        oid = record_id.get("$oid") if isinstance(record_id, dict) else None
        paired.append((index_of.get(str(oid), 0), record))
    return paired


def build_partition_sink(
    plan: Any,
    resources: SinkResources,
    *,
    executors: SinkResources | None,
    processor: str,
    run_tag: str,
) -> Any:
    """The `PartitionSink` of a compiled sink plan.

    `resources` reaches the stores from the driver; `executors` is a picklable equivalent
    for the executors, or None when they cannot reach the plan's target (the partitions are
    then written in the driver).

    Raises:
        ValueError: For a plan of an unknown kind or a File connection without a directory.
    """
    if isinstance(plan, FileEmitPlan):
        connection = resources.connection(plan.connection)
        root = (connection.config if connection else {}).get("directory")
        if not isinstance(root, str):
            raise ValueError(f"File connection {plan.connection!r} has no directory")
        return FilePartitionSink(plan, root=root, processor=processor, run_tag=run_tag)
    build_sink_writer(plan, resources, processor=processor, run_tag=run_tag)  # checks the plan
    target = executors if executors is not None else resources
    return WriterPartitionSink(
        make=_WriterFactory(plan, target, processor, run_tag),
        processor=processor,
        on_executors=executors is not None,
    )


@dataclass(frozen=True)
class _WriterFactory:
    """Builds a plan's batch writer (picklable with picklable resources)."""

    plan: Any
    resources: Any
    processor: str
    run_tag: str

    def __call__(self) -> Any:
        return build_sink_writer(
            self.plan, self.resources, processor=self.processor, run_tag=self.run_tag
        )
