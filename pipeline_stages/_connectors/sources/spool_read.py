"""Reading the HTTP-ingest spool in bulk: where records are (`SpoolIndex`) and their payloads
in blocks (`read_payloads`), for the source's tasks.

The spool's own `Spool.read` walks a segment from its start, one buffered read per header and
payload. A micro-batch split over several tasks needs each task to start in the middle of a
segment: the driver walks the batch's headers once (`SpoolIndex.locate`, headers only, from
where the previous batch ended) and hands every task the byte position of its first record;
the task reads from there in large blocks and checks every record (sequence, CRC) as
`Spool.read` does. A position that no longer holds the expected record (segments deleted
under a restarted query) is not trusted: the task falls back to `Spool.read`.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline_stages._connectors.sources.spool import (
    _HEADER,
    Spool,
    SpoolError,
    _segment_path,
    _segments,
)

_BLOCK = 4 * 1024 * 1024
#: Records per list `read_payloads` yields: the source turns each into one Arrow batch, which
#: Spark consumes while the task reads the next.
READ_CHUNK_RECORDS = 10_000


@dataclass(frozen=True)
class Position:
    """Record `seq` starts at byte `offset` of the segment whose first record is `segment`."""

    seq: int
    segment: int
    offset: int


def _headers(path: Path, offset: int) -> Iterator[tuple[int, int, int, int]]:
    """`(seq, offset, length, crc)` of the records of a segment from byte `offset` on (a torn
    last record included: readers stop at the durable end they were given)."""
    with open(path, "rb") as fh:
        base, buf, pos = offset, b"", 0
        while True:
            if len(buf) - pos < _HEADER.size:
                base += pos
                fh.seek(base)
                buf, pos = fh.read(_BLOCK), 0
                if len(buf) < _HEADER.size:
                    return
            seq, length, crc = _HEADER.unpack_from(buf, pos)
            yield seq, base + pos, length, crc
            pos += _HEADER.size + length


class SpoolIndex:
    """Driver-side positions of one connection's records, resumed from the last batch's end."""

    def __init__(self, spool: Spool, connection: str) -> None:
        self._directory = spool.root / connection
        self._next: Position | None = None  # where the record after the last walk starts

    def locate(self, seqs: list[int], last: int) -> list[Position | None]:
        """Positions of records `seqs` (ascending, all `<= last`); None where not found.

        Walks the headers up to record `last` and remembers where the next one starts.
        """
        if not seqs:
            return []
        found: dict[int, Position] = {}
        wanted = set(seqs)
        segments = [s for s in _segments(self._directory) if s <= last]
        start = self._resume(seqs[0], segments)
        if start is None:
            return [None] * len(seqs)
        for segment in [s for s in segments if s >= start.segment]:
            offset = start.offset if segment == start.segment else 0
            for seq, at, length, _crc in _headers(_segment_path(self._directory, segment), offset):
                if seq in wanted:
                    found[seq] = Position(seq, segment, at)
                if seq >= last:
                    self._next = Position(seq + 1, segment, at + _HEADER.size + length)
                    return [found.get(s) for s in seqs]
        return [found.get(s) for s in seqs]

    def _resume(self, first: int, segments: list[int]) -> Position | None:
        """Where to start walking to reach record `first`."""
        holding = [s for s in segments if s <= first]
        if not holding:
            return None
        segment = holding[-1]
        cached = self._next
        if cached is not None and cached.segment == segment and cached.seq <= first:
            return cached
        return Position(segment, segment, 0)


def read_payloads(
    spool: Spool, connection: str, first: int, last: int, position: Position | None
) -> Iterator[list[tuple[int, bytes]]]:
    """Records `first..last` as lists of `(seq, payload)`, in order, checked as `Spool.read`
    checks them, starting at `position` when it holds record `first`."""
    directory = spool.root / connection
    if position is None or not _holds(directory, position, first):
        records = list(spool.read(connection, first, last))
        for begin in range(0, len(records), READ_CHUNK_RECORDS):
            yield records[begin : begin + READ_CHUNK_RECORDS]
        return
    expected = first
    segments = [s for s in _segments(directory) if position.segment <= s <= last]
    for segment in segments:
        if segment != position.segment and segment != expected:
            raise SpoolError(f"sequence gap in {connection!r}: {segment} after {expected - 1}")
        offset = position.offset if segment == position.segment else 0
        chunk: list[tuple[int, bytes]] = []
        for record in _payloads(_segment_path(directory, segment), offset):
            if record[0] != expected:
                raise SpoolError(
                    f"sequence gap in {connection!r}: {record[0]} after {expected - 1}"
                )
            chunk.append(record)
            expected += 1
            if len(chunk) == READ_CHUNK_RECORDS or expected > last:
                yield chunk
                chunk = []
            if expected > last:
                return
        if chunk:
            yield chunk


def _holds(directory: Path, position: Position, seq: int) -> bool:
    path = _segment_path(directory, position.segment)
    try:
        with open(path, "rb") as fh:
            fh.seek(position.offset)
            header = fh.read(_HEADER.size)
    except FileNotFoundError:
        return False
    return len(header) == _HEADER.size and _HEADER.unpack(header)[0] == seq


def _payloads(path: Path, offset: int) -> Iterator[tuple[int, bytes]]:
    """`(seq, payload)` of the intact records of a segment from byte `offset` (stops at a torn
    or corrupt record, as `spool._read_record` does)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        buf = fh.read(_BLOCK)
        pos = 0
        while True:
            if len(buf) - pos < _HEADER.size:
                buf = buf[pos:] + fh.read(_BLOCK)
                pos = 0
                if len(buf) < _HEADER.size:
                    return
            seq, length, crc = _HEADER.unpack_from(buf, pos)
            end = pos + _HEADER.size + length
            if end > len(buf):
                missing = end - len(buf)
                buf = buf[pos:] + fh.read(max(_BLOCK, missing))
                pos, end = 0, _HEADER.size + length
                if end > len(buf):
                    return
            payload = buf[pos + _HEADER.size : end]
            if zlib.crc32(payload) != crc:
                return
            yield seq, payload
            pos = end
