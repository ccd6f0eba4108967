"""The File source's micro-batch split over tasks, and the reading of one task's lines in bulk.

A micro-batch is the lines between two offsets (`files.FilePosition`), across one or more
files. `plan_tasks` cuts them into at most `tasks` runs of about equal size (a run never
crosses a file; a task may hold several runs, so many small files do not make many tasks);
each run carries the byte range of its lines and the arrival sequence before its first line,
so a task reads only its bytes and numbers the lines exactly as a single reader would.
`read_run` turns a run into `RAW_ARROW` batches with Arrow's kernels (no per-line Python
for the common line; see `arrow_records`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline_stages._connectors.sources.arrow_records import blank, checked, raw_batch

_NEWLINE = 10
#: Lines per Arrow batch a task yields. Spark consumes a batch while the reader's Python
#: checks the next one, so a run read in chunks overlaps the two; one batch per run kept the
#: JVM waiting for the whole run (a one-bucket window reads its batch in one task): +9-16 %
#: end to end at 120k rows a batch (benchmarks/RESULTS.md, seventeenth session).
READ_CHUNK_LINES = 4_096


@dataclass(frozen=True)
class LineIndex:
    """Where the lines of a file are: the offsets of its newlines, and its size."""

    newlines: np.ndarray
    size: int

    @classmethod
    def of(cls, data: bytes) -> LineIndex:
        """The index of a file's bytes."""
        return cls(np.flatnonzero(np.frombuffer(data, np.uint8) == _NEWLINE), len(data))

    def lines(self, *, final: bool) -> int:
        """Lines that can be read: a last line without newline only when `final`."""
        count = len(self.newlines)
        unterminated = self.size > 0 and (count == 0 or int(self.newlines[-1]) != self.size - 1)
        return count + 1 if final and unterminated else count

    def start(self, line: int) -> int:
        """The byte offset where line `line` (0-based) begins."""
        return 0 if line == 0 else int(self.newlines[line - 1]) + 1

    def end(self, line: int) -> int:
        """The byte offset where line `line` ends (its newline, or the end of the file)."""
        return int(self.newlines[line]) if line < len(self.newlines) else self.size


@dataclass(frozen=True)
class Run:
    """Lines `first .. first + count - 1` (0-based) of file `name`, bytes `[start, end)`
    (no trailing newline), numbered from `seq_before + 1`."""

    name: str
    first: int
    count: int
    start: int
    end: int
    seq_before: int


def plan_tasks(
    ranges: Sequence[tuple[str, int, int]],
    seq_before: int,
    indexes: dict[str, LineIndex],
    *,
    tasks: int,
    min_rows: int,
) -> list[list[Run]]:
    """The runs of each task for `(name, first line, end line)` ranges read in order after
    arrival sequence `seq_before` (`indexes` has every file named).

    At most `tasks` tasks, fewer when they would get under `min_rows` lines each.
    """
    total = sum(max(0, end - first) for _, first, end in ranges)
    count = max(1, min(tasks, total // max(1, min_rows)))
    target = -(-total // count) if total else 0
    plan: list[list[Run]] = [[]]
    room = target
    seq = seq_before
    for name, first, end in ranges:
        index = indexes[name]
        line = first
        while line < end:
            if room == 0:
                plan.append([])
                room = target
            take = min(end - line, room)
            last = line + take - 1
            plan[-1].append(Run(name, line, take, index.start(line), index.end(last), seq))
            seq += take
            line += take
            room -= take
    return [runs for runs in plan if runs]


def read_run(
    directory: str, run: Run, *, meta_prefix: str, source_ts_ms: int
) -> Iterator[pa.RecordBatch]:
    """The run's lines as `RAW_ARROW` batches of at most `READ_CHUNK_LINES` rows (blank lines
    skipped; they keep their number)."""
    with open(os.path.join(directory, run.name), "rb") as fh:
        fh.seek(run.start)
        data = fh.read(run.end - run.start)
    lines = split_lines(data)
    if len(lines) > run.count:  # the file was rewritten under its offsets: keep the count
        lines = lines.slice(0, run.count)
    keep = pc.invert(blank(lines))
    numbers = np.arange(run.first + 1, run.first + 1 + len(lines), dtype=np.int64)
    if not pc.all(keep).as_py():
        lines, numbers = lines.filter(keep), numbers[keep.to_numpy(zero_copy_only=False)]
    for at in range(0, len(lines), READ_CHUNK_LINES):
        chunk = lines.slice(at, READ_CHUNK_LINES)
        chunk_numbers = numbers[at : at + READ_CHUNK_LINES]
        raw, error = checked(chunk)
        line_text = pa.array(chunk_numbers).cast(pa.string())
        yield raw_batch(
            part=0,
            seq=chunk_numbers + (run.seq_before - run.first),
            raw=raw,
            source_ts_ms=source_ts_ms,
            meta=pc.binary_join_element_wise(meta_prefix, line_text, "}", ""),
            error=error,
        )


def split_lines(data: bytes) -> pa.Array:
    """The `\\n`-separated lines of `data` as a binary array (as `data.split(b"\\n")`)."""
    buffer = data + b"\n"
    ends = np.flatnonzero(np.frombuffer(buffer, np.uint8) == _NEWLINE)
    offsets = np.concatenate([[0], ends + 1])
    if offsets[-1] < 2**31:
        kind, offsets = pa.binary(), offsets.astype(np.int32)
    else:
        kind, offsets = pa.large_binary(), offsets.astype(np.int64)
    array = pa.Array.from_buffers(
        kind, len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(buffer)]
    )
    return pc.binary_slice(array, 0, -1)  # the newlines
