"""The HTTP-ingest spool: durable, append-only, sequence-numbered records per connection.

Layout: ``<data_dir>/spool/<connection>/`` holds ``seg-<first seq, 20 digits>.log`` segment
files and a ``.lock`` file. A record is a 16-byte header (big-endian ``seq`` u64, payload
length u32, CRC-32 of the payload u32) followed by the raw payload bytes. Payloads are stored
as received, invalid JSON included: the reader decides what they mean.

Guarantees:

* **Durable**: :meth:`Spool.append` returns only after ``write`` + ``flush`` + ``os.fsync`` of
  the segment (and of the directory when it created a segment).
* **Gap-free, monotonic sequence numbers** starting at 1, per connection, across restarts:
  the next number is derived from the files (the last segment's last record), never from
  memory alone.
* **Concurrent appenders** in threads and processes are serialised by ``fcntl.flock`` on
  ``.lock`` (each append opens its own descriptor, so threads exclude each other too).
* **Crash recovery**: a torn record at the end of the last segment (a crash mid-write) is
  truncated by the next appender, under the lock, before it writes.
* **Readers need only the files**: :meth:`Spool.read` takes no lock (it reads records that
  were complete when :meth:`Spool.latest_seq` reported them); :meth:`Spool.latest_seq` takes a
  shared lock, so it never reports a record whose append has not finished its fsync.

Not for network file systems (``flock`` semantics are not reliable there).
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import threading
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

CONNECTION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_RECORD_BYTES = 16 * 1024 * 1024
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024

_HEADER = struct.Struct(">QII")
#: Bytes `_intact_end` reads at a time.
_SCAN_BLOCK = 4 * 1024 * 1024
_SEGMENT = re.compile(r"^seg-(\d{20})\.log$")


class SpoolError(Exception):
    """A spool problem: bad connection name, oversized record, corrupt or missing data."""


@dataclass(frozen=True)
class _Tail:
    """Where the next record goes: in segment ``first_seq`` at ``offset``, numbered ``last_seq + 1``."""

    first_seq: int
    offset: int
    last_seq: int


class Spool:
    """Durable append-only record log per connection (see the module docstring).

    Args:
        data_dir: Sluice's data directory; the spool lives in ``<data_dir>/spool``.
        segment_bytes: Start a new segment once the current one reaches this size.
    """

    def __init__(self, data_dir: str | Path, *, segment_bytes: int = DEFAULT_SEGMENT_BYTES) -> None:
        self.root = Path(data_dir) / "spool"
        self._segment_bytes = segment_bytes
        self._guard = threading.Lock()
        self._thread_locks: dict[str, threading.Lock] = {}
        # Per-connection tail cache: bytes before a known-good offset never change, so the
        # next scan starts there instead of re-reading a whole segment.
        self._tails: dict[str, _Tail] = {}

    def append(self, connection: str, records: Sequence[bytes | str]) -> tuple[int, int]:
        """Appends records durably and returns their ``(first_seq, last_seq)``.

        Args:
            connection: A connection name matching ``^[A-Za-z0-9_-]{1,64}$``.
            records: Raw payloads; ``str`` is encoded as UTF-8.

        Raises:
            SpoolError: On a bad name, an empty batch or a record over 16 MiB.
        """
        directory = self._directory(connection)
        payloads = [r.encode("utf-8") if isinstance(r, str) else bytes(r) for r in records]
        if not payloads:
            raise SpoolError("append needs at least one record")
        if any(len(p) > MAX_RECORD_BYTES for p in payloads):
            raise SpoolError(f"a record is larger than {MAX_RECORD_BYTES} bytes")
        _make_durable_dir(directory)
        with self._thread_lock(connection), _flock(directory, fcntl.LOCK_EX, create=True):
            tail = _recover_tail(directory, self._tails.pop(connection, None))
            if tail.offset >= self._segment_bytes:
                tail = _new_segment(directory, tail.last_seq + 1)
            first = tail.last_seq + 1
            data = _frame(first, payloads)
            _write_durably(_segment_path(directory, tail.first_seq), tail.offset, data)
            last = first + len(payloads) - 1
            self._tails[connection] = _Tail(tail.first_seq, tail.offset + len(data), last)
        return first, last

    def latest_seq(self, connection: str) -> int:
        """The last durably appended sequence number, 0 if none."""
        directory = self._directory(connection)
        if not directory.is_dir():
            return 0  # never appended to; readers must not create the directory
        with self._thread_lock(connection), _flock(directory, fcntl.LOCK_SH, create=True):
            tail = _scan_tail(directory, self._tails.get(connection))
            self._tails[connection] = tail
            return tail.last_seq

    def read(self, connection: str, start_seq: int, end_seq: int) -> Iterator[tuple[int, bytes]]:
        """Yields ``(seq, raw)`` for ``start_seq <= seq <= end_seq`` (both inclusive), in order.

        Lock-free: it relies only on the files, so it works in any process. Records past the
        end of the data are simply not yielded; ask :meth:`latest_seq` for the durable end.

        Raises:
            SpoolError: At once on a bad name or ``start_seq < 1``; while iterating if
                ``start_seq`` was already deleted or the records have a gap.
        """
        directory = self._directory(connection)
        if start_seq < 1:
            raise SpoolError("sequence numbers start at 1")
        return _iter_range(directory, start_seq, end_seq)

    def delete_before(self, connection: str, seq: int) -> int:
        """Deletes whole segments whose records are all below ``seq``; returns how many.

        The last segment is always kept: it carries the sequence number across restarts.
        """
        directory = self._directory(connection)
        if not directory.exists():
            return 0
        removed = 0
        with _flock(directory, fcntl.LOCK_EX, create=True):
            segments = _segments(directory)
            for current, following in zip(segments, segments[1:], strict=False):
                if following <= seq:
                    _segment_path(directory, current).unlink()
                    removed += 1
            _fsync_dir(directory)
        return removed

    def _directory(self, connection: str) -> Path:
        if not isinstance(connection, str) or not CONNECTION_NAME.fullmatch(connection):
            raise SpoolError(f"invalid connection name {connection!r}: use [A-Za-z0-9_-]{{1,64}}")
        return self.root / connection

    def _thread_lock(self, connection: str) -> threading.Lock:
        # flock alone would do; the thread lock just keeps threads from spinning on it.
        with self._guard:
            return self._thread_locks.setdefault(connection, threading.Lock())


@contextmanager
def _flock(directory: Path, mode: int, *, create: bool) -> Iterator[None]:
    flags = os.O_RDWR | os.O_CREAT if create else os.O_RDONLY
    fd = os.open(directory / ".lock", flags, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _segment_path(directory: Path, first_seq: int) -> Path:
    return directory / f"seg-{first_seq:020d}.log"


def _segments(directory: Path) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_SEGMENT.fullmatch, names) if m)


def _frame(first_seq: int, payloads: Sequence[bytes]) -> bytes:
    parts: list[bytes] = []
    for seq, payload in enumerate(payloads, start=first_seq):
        parts.append(_HEADER.pack(seq, len(payload), zlib.crc32(payload)))
        parts.append(payload)
    return b"".join(parts)


def _read_record(fh: BinaryIO) -> tuple[int, bytes] | None:
    """The next complete, intact record, or None at the end or at a torn tail."""
    header = fh.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    seq, length, crc = _HEADER.unpack(header)
    payload = fh.read(length)
    if len(payload) < length or zlib.crc32(payload) != crc:
        return None
    return seq, payload


def _iter_range(directory: Path, start_seq: int, end_seq: int) -> Iterator[tuple[int, bytes]]:
    segments = _segments(directory)
    if end_seq < start_seq or not segments:
        return
    if start_seq < segments[0]:
        raise SpoolError(f"records before {segments[0]} in {directory.name!r} were deleted")
    first_index = max(i for i, s in enumerate(segments) if s <= start_seq)
    expected = segments[first_index]
    for seg_first in segments[first_index:]:
        if seg_first > end_seq:
            return
        if seg_first != expected:
            raise SpoolError(
                f"sequence gap in {directory.name!r}: {seg_first} after {expected - 1}"
            )
        for seq, payload in _iter_segment(_segment_path(directory, seg_first)):
            if seq != expected:
                raise SpoolError(f"sequence gap in {directory.name!r}: {seq} after {expected - 1}")
            expected += 1
            if seq > end_seq:
                return
            if seq >= start_seq:
                yield seq, payload


def _iter_segment(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        fh = open(path, "rb")  # closed by the with below; open errors must be caught alone
    except FileNotFoundError:
        raise SpoolError(f"{path.name} was deleted while being read") from None
    with fh:
        while (record := _read_record(fh)) is not None:
            yield record


def _scan_tail(directory: Path, cached: _Tail | None) -> _Tail:
    """Finds the end of the last intact record of the last segment, resuming from ``cached``."""
    segments = _segments(directory)
    if not segments:
        return _Tail(first_seq=1, offset=0, last_seq=0)
    first = segments[-1]
    path = _segment_path(directory, first)
    tail = cached if cached is not None and cached.first_seq == first else None
    if tail is None or path.stat().st_size < tail.offset:
        tail = _Tail(first_seq=first, offset=0, last_seq=first - 1)
    last, offset = _intact_end(path, tail.offset, tail.last_seq)
    return _Tail(first_seq=first, offset=offset, last_seq=last)


def _intact_end(path: Path, offset: int, last: int) -> tuple[int, int]:
    """`(last seq, end offset)` of the run of intact records numbered from `last + 1` that
    starts at `offset` in segment `path`.

    Reads in blocks of `_SCAN_BLOCK` and checks every record's sequence and CRC, as
    `_read_record` does one record at a time: two reads a record made a fresh process's first
    scan of a full segment cost ~1 us a record (0.36 s for 360k records of 120 bytes).
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(offset)
        buf, at = b"", 0  # `buf` holds the file from `offset - at` on
        while True:
            if len(buf) - at < _HEADER.size:
                buf, at = buf[at:] + fh.read(max(_SCAN_BLOCK, _HEADER.size)), 0
                if len(buf) < _HEADER.size:
                    return last, offset
            seq, length, crc = _HEADER.unpack_from(buf, at)
            end = at + _HEADER.size + length
            if seq != last + 1 or offset + _HEADER.size + length > size:
                return last, offset  # another run's record, or a torn one
            if end > len(buf):
                buf, at = buf[at:] + fh.read(max(_SCAN_BLOCK, end - len(buf))), 0
                end = _HEADER.size + length
            if zlib.crc32(memoryview(buf)[end - length : end]) != crc:
                return last, offset
            last, offset, at = seq, offset + _HEADER.size + length, end


def _recover_tail(directory: Path, cached: _Tail | None) -> _Tail:
    """The tail, after cutting off a torn record left by a crash (caller holds LOCK_EX)."""
    tail = _scan_tail(directory, cached)
    path = _segment_path(directory, tail.first_seq)
    if not path.exists():
        return _new_segment(directory, tail.first_seq)
    if path.stat().st_size > tail.offset:
        os.truncate(path, tail.offset)
    return tail


def _new_segment(directory: Path, first_seq: int) -> _Tail:
    fd = os.open(_segment_path(directory, first_seq), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    _fsync_dir(directory)  # the new name must survive a crash, or its records would vanish
    return _Tail(first_seq=first_seq, offset=0, last_seq=first_seq - 1)


def _write_durably(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _make_durable_dir(directory: Path) -> None:
    """Creates ``spool/`` and ``spool/<connection>/`` so that a crash cannot lose their names."""
    for level in (directory.parent, directory):
        if not level.is_dir():
            level.mkdir(parents=True, exist_ok=True)
            _fsync_dir(level.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
