"""The File source: a directory of JSON-lines files under a File connection's root.

Files are read in name order (hidden files and `*.tmp` are skipped, so a writer that writes
a temporary file and renames it, like the File sink, is never read half-way); new files are
picked up as they appear, and a file may grow until a file with a later name exists. Name
new files so they sort after the existing ones (the File sink's names do).

Offsets are `{"file", "line", "seq", "ts"}`: every line up to `line` (a count) of `file`,
and all of every earlier file, has been read; `seq` is the number of lines read in total,
which is each record's `seq` (the arrival sequence); `ts` is the time the offset was
planned, used as the source timestamp of the batch's records (so a replay stamps them the
same). Offsets live in Spark's checkpoint, so a replayed micro-batch reads the same lines.
A line ending without a newline counts only once a later file exists (it may still be
being written). Blank lines are skipped (they keep their sequence number).

`_stream_meta.source` is `{type: "file", path: <file, relative to the root>, line: <1-based>}`.

A micro-batch is read by up to `parallelism` tasks (the session's `defaultParallelism`, so
every executor core; 1 when a one-bucket window follows, which runs in one task anyway),
each reading its own byte range of the files and numbering its lines from the sequence
number before them (`file_ranges`); lines are read and checked in Arrow batches, so the rows
are the same, in the same order by `seq`, as one task would give.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._connectors.file_paths import PathEscapes, resolve_under
from pipeline_stages._connectors.sources.file_ranges import LineIndex, Run, plan_tasks, read_run
from pipeline_stages._connectors.sources.raw_source import RawRecordSource, read_tasks

FORMAT = "sluice_file"
SOURCE_TYPE = "file"
DEFAULT_MAX_PER_BATCH = 10_000
#: Fewer lines than this per task are not worth a task of their own.
MIN_ROWS_PER_TASK = 4_096
#: Line indexes kept on the driver (the files a batch spans; usually one or two).
_INDEXES_KEPT = 4


@dataclass(frozen=True)
class FilePosition:
    """An offset of the File source (see the module docstring)."""

    file: str = ""
    line: int = 0
    seq: int = 0
    ts: int = 0

    @classmethod
    def parse(cls, offset: dict[str, Any]) -> FilePosition:
        """The position of an offset dict as stored in the checkpoint."""
        return cls(
            str(offset.get("file", "")),
            int(offset.get("line", 0)),
            int(offset.get("seq", 0)),
            int(offset.get("ts", 0)),
        )

    def to_offset(self) -> dict[str, Any]:
        """The JSON-able offset."""
        return asdict(self)


def listed(directory: str) -> list[str]:
    """The readable file names of a directory, in name order."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(
        n
        for n in names
        if not n.startswith(".")
        and not n.endswith(".tmp")
        and os.path.isfile(os.path.join(directory, n))
    )


def complete_lines(data: bytes, *, final: bool) -> int:
    """Lines of `data` that can be read: a last line without newline only when `final`."""
    count = data.count(b"\n")
    return count + 1 if final and data and not data.endswith(b"\n") else count


def advance(
    start: FilePosition, files: Sequence[tuple[str, int]], max_rows: int | None, now_ms: int
) -> FilePosition:
    """The end offset of the next batch: up to `max_rows` lines after `start`.

    `files` are `(name, readable lines)` in name order; names before `start.file` are done.
    """
    file, line, seq = start.file, start.line, start.seq
    remaining = max_rows if max_rows is not None else float("inf")
    for name, count in files:
        if name < file or remaining <= 0:
            continue
        already = line if name == file else 0
        take = int(min(count - already, remaining))
        if take > 0:
            file, line, seq = name, already + take, seq + take
            remaining -= take
    if seq == start.seq:
        return start
    return FilePosition(file, line, seq, now_ms)


def line_ranges(
    start: FilePosition, end: FilePosition, names: Sequence[str]
) -> list[tuple[str, int, int]]:
    """`(name, first line index, end line index)` to read between two offsets."""
    ranges: list[tuple[str, int, int]] = []
    for name in names:
        if name < start.file or name > end.file:
            continue
        first = start.line if name == start.file else 0
        last = end.line if name == end.file else None
        ranges.append((name, first, -1 if last is None else last))
    return ranges


class _Task(InputPartition):
    """One task's runs of a micro-batch (`file_ranges.plan_tasks`) and the batch's time."""

    def __init__(self, runs: list[Run], ts: int) -> None:
        self.runs = runs
        self.ts = ts


class FileStreamReader(DataSourceStreamReader):
    """See the module docstring."""

    def __init__(self, options: dict[str, str]) -> None:
        # Spark lower-cases option keys.
        self.directory = options["directory"]
        self.relative = options.get("relative", "")
        self.max_per_batch = max(1, int(options.get("maxrecordsperbatch", DEFAULT_MAX_PER_BATCH)))
        self.tasks = max(1, int(options.get("parallelism", "1")))
        self.min_rows_per_task = max(1, int(options.get("minrowspertask", MIN_ROWS_PER_TASK)))
        # Driver only: the line index of the files seen lately, and the line counts
        # (complete, and without an unterminated last line) of the pending ones, by name,
        # valid while (size, mtime) stay.
        self._indexes: dict[str, tuple[tuple[int, int], LineIndex]] = {}
        self._counts: dict[str, tuple[tuple[int, int], int, int]] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_indexes"], state["_counts"] = {}, {}  # tasks get byte ranges: driver only
        return state

    def _index(self, name: str) -> LineIndex:
        """The line index of a file (cached while its size and mtime stay)."""
        path = os.path.join(self.directory, name)
        stat = os.stat(path)
        key = (stat.st_size, stat.st_mtime_ns)
        cached = self._indexes.get(name)
        if cached is None or cached[0] != key:
            with open(path, "rb") as fh:
                cached = (key, LineIndex.of(fh.read()))
            self._indexes[name] = cached
            while len(self._indexes) > _INDEXES_KEPT:  # oldest names first: files only grow
                del self._indexes[min(self._indexes)]
        return cached[1]

    def _readable(self, after: str) -> list[tuple[str, int]]:
        """`(name, readable lines)` of the files from `after` on (counts cached by size and
        mtime for every pending file, the bulkier line indexes only for a few)."""
        names = [n for n in listed(self.directory) if n >= after]
        for done in [n for n in self._counts if n < after]:
            del self._counts[done]
        out = []
        for i, name in enumerate(names):
            stat = os.stat(os.path.join(self.directory, name))
            key = (stat.st_size, stat.st_mtime_ns)
            cached = self._counts.get(name)
            if cached is None or cached[0] != key:
                index = self._index(name)
                cached = (key, index.lines(final=True), index.lines(final=False))
                self._counts[name] = cached
            out.append((name, cached[1] if i + 1 < len(names) else cached[2]))
        return out

    def initialOffset(self) -> dict[str, Any]:
        """Before the first line of the first file."""
        return FilePosition().to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Bound a catch-up batch."""
        return ReadMaxRows(self.max_per_batch)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Up to the read limit's lines after `start`."""
        position = FilePosition.parse(start)
        max_rows = None if isinstance(limit, ReadAllAvailable) else self.max_per_batch
        if isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        now = int(time.time() * 1000)
        return advance(position, self._readable(position.file), max_rows, now).to_offset()

    def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Lines between two offsets (`$throttle`)."""
        return FilePosition.parse(end).seq - FilePosition.parse(start).seq

    def bytes_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """The bytes of those lines, without their newlines (`$throttle`'s `bytesPerSec`;
        what `inputMessageSize` counts of them)."""
        first, last = FilePosition.parse(start), FilePosition.parse(end)
        total = 0
        for name, begin, stop in line_ranges(first, last, listed(self.directory)):
            index = self._index(name)
            stop = index.lines(final=True) if stop < 0 else stop
            newlines = max(0, min(stop, len(index.newlines)) - begin)
            total += _line_start(index, stop) - _line_start(index, begin) - newlines
        return total

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """The batch's lines cut over up to `parallelism` tasks (`file_ranges.plan_tasks`)."""
        if start == end:
            return []
        first, last = FilePosition.parse(start), FilePosition.parse(end)
        ranges = []
        indexes = {}
        for name, begin, stop in line_ranges(first, last, listed(self.directory)):
            index = indexes[name] = self._index(name)
            # Every file but the batch's last is complete: a later one existed at planning.
            available = index.lines(final=True)
            ranges.append((name, begin, min(stop if stop >= 0 else available, available)))
        plan = plan_tasks(
            ranges, first.seq, indexes, tasks=self.tasks, min_rows=self.min_rows_per_task
        )
        return [_Task(runs, last.ts) for runs in plan]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """The task's lines as Arrow batches of `RAW_SCHEMA` rows."""
        if not isinstance(partition, _Task):
            raise TypeError(f"unexpected partition {partition!r}")
        for run in partition.runs:
            path = os.path.join(self.relative, run.name) if self.relative else run.name
            prefix = f'{{"type": {json.dumps(SOURCE_TYPE)}, "path": {json.dumps(path)}, "line": '
            yield from read_run(self.directory, run, meta_prefix=prefix, source_ts_ms=partition.ts)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: files are never deleted by Sluice."""


def _line_start(index: LineIndex, line: int) -> int:
    """Where line `line` (0-based) begins; the file's size past its last line."""
    return index.start(line) if line < index.lines(final=True) else index.size


def read_file_stream(spec: Any, ctx: Any, connection: Any, body: str) -> Any | None:
    """The stream of `$source` on a File connection, or None (problem recorded)."""
    root = connection.config.get("directory")
    relative = spec.path or "."
    path = join_path(body, "path")
    if not isinstance(root, str):
        ctx.problems.error(
            join_path(body, "connectionName"),
            ProblemCode.INVALID_VALUE,
            f"File connection {connection.name!r} has no directory",
        )
        return None
    try:
        directory = resolve_under(root, relative)
    except PathEscapes as error:
        ctx.problems.error(path, ProblemCode.INVALID_VALUE, str(error))
        return None
    if os.path.isfile(directory):
        ctx.problems.error(
            path, ProblemCode.INVALID_VALUE, f"path {relative!r} is a file; name its directory"
        )
        return None
    return (
        ctx.read_stream()
        .format(FORMAT)
        .option("directory", directory)
        .option("relative", "" if relative == "." else relative)
        .option("maxRecordsPerBatch", str(_batch_limit(spec)))
        .option("parallelism", str(read_tasks(ctx)))
        .load()
    )


def _batch_limit(spec: Any) -> int:
    """`config.maxOffsetsPerTrigger` (lines per micro-batch), or the default."""
    return int(getattr(spec.config, "max_offsets_per_trigger", None) or DEFAULT_MAX_PER_BATCH)


class FileDataSource(RawRecordSource):
    """Options: `directory` (absolute, already checked to be under the root), `relative`
    (the path as the pipeline wrote it, for metadata), `maxRecordsPerBatch`."""

    format_name = FORMAT
    stream_reader = FileStreamReader
