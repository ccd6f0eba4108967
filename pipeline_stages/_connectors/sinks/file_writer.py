"""`$emit` to a File connection: one JSON-lines file per micro-batch and target directory.

Exactly-once effects: a batch's file is named after the processor, the run's checkpoint
(`run_tag`: the service's checkpoint generation, or the start time of a `sluice process`
run) and the batch id, and is written to a hidden temporary file, fsynced, then renamed over
the final name. A replayed batch (same id, same rows) therefore replaces its file with the
same content instead of adding lines, and a reader never sees a half-written file. Names
sort in batch order (zero-padded ids), which is the order the File source reads them in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._connectors.file_paths import PathEscapes, resolve_under
from pipeline_stages._connectors.sinks.ids import effective_keys, failure_records
from pipeline_stages._connectors.sinks.plans import FileEmitPlan, TargetError, resolve_name
from pipeline_stages._stream.batch import BatchResult

SUFFIX = ".jsonl"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def batch_file_name(processor: str, run_tag: str, batch_id: int) -> str:
    """`<processor>-<run>-<batch id, 12 digits>.jsonl`, safe as a file name."""
    safe = _UNSAFE.sub("_", processor).lstrip(".") or "processor"
    tag = _UNSAFE.sub("_", run_tag)
    return f"{safe}-{tag}-{batch_id:012d}{SUFFIX}"


def write_atomically(directory: str, name: str, text: str) -> str:
    """Write `text` to `directory/name` through a hidden temporary file and a rename."""
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, name)
    temp = os.path.join(directory, f".{name}.tmp")
    with open(temp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temp, final)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself must survive a crash, or a replay is skipped
    finally:
        os.close(fd)
    return final


class FileEmitWriter:
    """Writes outputs as JSON lines under the File connection's root (see the module doc)."""

    def __init__(
        self,
        plan: FileEmitPlan,
        *,
        root: str,
        processor: str,
        run_tag: str,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.plan = plan
        self.root = root
        self._processor = processor
        self._run_tag = run_tag
        self._clock = clock or (lambda: datetime.now(tz=UTC))

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Write the batch's file(s); returns DLQ records for documents with a bad `path`."""
        keys = effective_keys(batch.outputs)
        lines: dict[str, list[str]] = {}
        failures: list[tuple[int, str]] = []
        for index, output in enumerate(batch.outputs):
            try:
                relative = resolve_name(self.plan.path, "path", output.target)
                directory = resolve_under(self.root, relative)
            except (TargetError, PathEscapes) as error:
                failures.append((index, str(error)))
                continue
            lines.setdefault(directory, []).append(output.doc_json)
        name = batch_file_name(self._processor, self._run_tag, batch.batch_id)
        for directory, docs in lines.items():
            write_atomically(directory, name, "".join(doc + "\n" for doc in docs))
        return failure_records(
            batch.outputs,
            keys,
            failures,
            operator=self.plan.operator,
            processor=self._processor,
            now=self._clock(),
        )
