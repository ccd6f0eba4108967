"""The HTTP-ingest spool: durability, sequence numbers, concurrency, range reads, names."""

from __future__ import annotations

import multiprocessing
import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._connectors.sources import spool as spool_module
from pipeline_stages._connectors.sources.spool import Spool, SpoolError


def segment_files(root: Path, connection: str = "c1") -> list[Path]:
    return sorted((root / "spool" / connection).glob("seg-*.log"))


def test_append_numbers_records_from_one_and_reads_them_back_raw(tmp_path):
    spool = Spool(tmp_path)
    assert spool.append("c1", ['{"a": 1}', b"\xff\x00 not json", "{broken"]) == (1, 3)
    assert spool.append("c1", ["é"]) == (4, 4)
    assert list(spool.read("c1", 1, 4)) == [
        (1, b'{"a": 1}'),
        (2, b"\xff\x00 not json"),
        (3, b"{broken"),
        (4, "é".encode()),
    ]
    assert spool.latest_seq("c1") == 4


def test_append_fsyncs_the_written_data_before_returning(tmp_path, monkeypatch):
    synced: list[tuple[bool, int]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        info = os.fstat(fd)
        synced.append((stat.S_ISDIR(info.st_mode), info.st_size))
        real_fsync(fd)

    monkeypatch.setattr(spool_module.os, "fsync", recording_fsync)
    spool = Spool(tmp_path)
    spool.append("c1", ["hello"])
    [segment] = segment_files(tmp_path)
    size = segment.stat().st_size
    assert size == 16 + 5  # one header and the payload
    assert (True, synced[0][1]) == synced[0]  # the new segment's directory entry first
    assert synced[-1] == (False, size)  # then the file, with the record in it


def test_sequence_continues_after_a_restart(tmp_path):
    assert Spool(tmp_path).append("c1", ["a", "b"]) == (1, 2)
    restarted = Spool(tmp_path)
    assert restarted.latest_seq("c1") == 2
    assert restarted.append("c1", ["c"]) == (3, 3)
    assert [seq for seq, _ in Spool(tmp_path).read("c1", 1, 3)] == [1, 2, 3]


def test_sequence_continues_across_segments_and_restarts(tmp_path):
    small = Spool(tmp_path, segment_bytes=38)  # two 19-byte records per segment
    for i in range(10):
        small.append("c1", [f"r{i:02d}"])
    assert len(segment_files(tmp_path)) == 5
    assert Spool(tmp_path, segment_bytes=38).append("c1", ["next"]) == (11, 11)
    assert [p for _, p in Spool(tmp_path).read("c1", 1, 11)][-2:] == [b"r09", b"next"]


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00",  # a torn header
        (3).to_bytes(8, "big") + (10).to_bytes(4, "big") + b"\x00\x00\x00\x00abc",  # torn payload
        (3).to_bytes(8, "big") + (3).to_bytes(4, "big") + b"\x00\x00\x00\x00abc",  # bad CRC
    ],
    ids=["torn-header", "torn-payload", "bad-crc"],
)
def test_a_torn_tail_from_a_crash_is_ignored_then_cut_off(tmp_path, garbage):
    Spool(tmp_path).append("c1", ["a", "b"])
    [segment] = segment_files(tmp_path)
    good_size = segment.stat().st_size
    with open(segment, "ab") as fh:
        fh.write(garbage)
    restarted = Spool(tmp_path)
    assert restarted.latest_seq("c1") == 2
    assert restarted.append("c1", ["c"]) == (3, 3)
    assert segment.stat().st_size == good_size + 16 + 1
    assert list(restarted.read("c1", 1, 3)) == [(1, b"a"), (2, b"b"), (3, b"c")]


def test_range_reads_are_inclusive_and_span_segments(tmp_path):
    spool = Spool(tmp_path, segment_bytes=50)
    for i in range(1, 21):
        spool.append("c1", [f"{i}"])
    assert len(segment_files(tmp_path)) > 3
    assert [s for s, _ in spool.read("c1", 5, 12)] == list(range(5, 13))
    assert list(spool.read("c1", 7, 7)) == [(7, b"7")]
    assert list(spool.read("c1", 10, 5)) == []
    assert [s for s, _ in spool.read("c1", 18, 99)] == [18, 19, 20]  # past the end: what exists
    assert list(spool.read("c1", 21, 30)) == []
    with pytest.raises(SpoolError):
        spool.read("c1", 0, 3)  # argument errors are raised at the call, not on iteration


def test_reading_an_unknown_connection_yields_nothing_and_creates_nothing(tmp_path):
    spool = Spool(tmp_path)
    assert spool.latest_seq("nobody") == 0
    assert list(spool.read("nobody", 1, 10)) == []
    assert not (tmp_path / "spool").exists()


def test_delete_before_drops_whole_old_segments_but_keeps_numbering(tmp_path):
    spool = Spool(tmp_path, segment_bytes=38)
    for i in range(1, 11):
        spool.append("c1", [f"r{i:02d}"])
    removed = spool.delete_before("c1", 6)
    assert removed == 2  # segments [1,2] and [3,4]; [5,6] still holds 6
    assert [s for s, _ in spool.read("c1", 5, 10)] == [5, 6, 7, 8, 9, 10]
    with pytest.raises(SpoolError):
        list(spool.read("c1", 4, 10))
    assert spool.delete_before("c1", 1000) == 2  # the last segment always stays
    assert Spool(tmp_path, segment_bytes=38).append("c1", ["x"]) == (11, 11)


def test_batches_must_be_non_empty_and_records_bounded(tmp_path, monkeypatch):
    spool = Spool(tmp_path)
    with pytest.raises(SpoolError):
        spool.append("c1", [])
    monkeypatch.setattr(spool_module, "MAX_RECORD_BYTES", 4)
    with pytest.raises(SpoolError):
        spool.append("c1", ["ok", "too long"])
    assert spool.latest_seq("c1") == 0


@pytest.mark.parametrize("name", ["", "..", "../x", "a/b", "a b", "a.b", "é", "x" * 65, "c1\n"])
def test_connection_names_are_validated(tmp_path, name):
    spool = Spool(tmp_path)
    with pytest.raises(SpoolError):
        spool.append(name, ["r"])
    with pytest.raises(SpoolError):
        spool.latest_seq(name)
    with pytest.raises(SpoolError):
        spool.read(name, 1, 1)
    assert not any(tmp_path.rglob("seg-*"))


@pytest.mark.parametrize("name", ["a", "Orders_2024-v2", "x" * 64])
def test_valid_connection_names(tmp_path, name):
    assert Spool(tmp_path).append(name, ["r"]) == (1, 1)


def _check_ranges(ranges: list[tuple[str, int, int]], spool: Spool, expected_total: int) -> None:
    """Every seq in 1..total is handed out exactly once and holds what its appender wrote."""
    seqs = sorted(s for _, first, last in ranges for s in range(first, last + 1))
    assert seqs == list(range(1, expected_total + 1))
    stored = dict(spool.read("c1", 1, expected_total))
    for tag, first, last in ranges:
        assert [stored[s] for s in range(first, last + 1)] == [
            f"{tag}:{k}".encode() for k in range(last - first + 1)
        ]


def _append_many(root: str, worker: int, batches: int, barrier: Any) -> list[tuple[str, int, int]]:
    spool = Spool(root, segment_bytes=2048)  # small segments: rolls happen under contention
    barrier.wait()
    ranges = []
    for batch in range(batches):
        tag = f"w{worker}b{batch}"
        first, last = spool.append("c1", [f"{tag}:{k}" for k in range(1 + batch % 3)])
        ranges.append((tag, first, last))
    return ranges


def _batch_records(batches: int) -> int:
    return sum(1 + b % 3 for b in range(batches))


def test_concurrent_appenders_in_threads_never_share_or_skip_a_number(tmp_path):
    workers, batches = 8, 30
    barrier = threading.Barrier(workers)
    results: list[list[tuple[str, int, int]]] = [[] for _ in range(workers)]

    def run(n: int) -> None:
        results[n] = _append_many(str(tmp_path), n, batches, barrier)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    _check_ranges(
        [r for rs in results for r in rs], Spool(tmp_path), workers * _batch_records(batches)
    )


def _process_entry(root: str, worker: int, batches: int, barrier: Any, out: Any) -> None:
    out.put(_append_many(root, worker, batches, barrier))


def _read_entry(root: str, start: int, end: int, out: Any) -> None:
    spool = Spool(root)
    out.put((spool.latest_seq("c1"), list(spool.read("c1", start, end))))


def test_concurrent_appenders_in_two_processes_never_share_or_skip_a_number(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    workers, batches = 2, 60
    barrier, out = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_process_entry, args=(str(tmp_path), n, batches, barrier, out))
        for n in range(workers)
    ]
    for p in procs:
        p.start()
    ranges = [r for _ in procs for r in out.get(timeout=120)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    _check_ranges(ranges, Spool(tmp_path), workers * _batch_records(batches))


def test_a_reader_in_another_process_needs_only_the_files(tmp_path):
    spool = Spool(tmp_path, segment_bytes=64)
    for i in range(1, 13):
        spool.append("c1", [f"rec{i}"])
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    reader = ctx.Process(target=_read_entry, args=(str(tmp_path), 3, 9, out))
    reader.start()
    latest, records = out.get(timeout=120)
    reader.join(timeout=60)
    assert reader.exitcode == 0
    assert latest == 12
    assert records == [(i, f"rec{i}".encode()) for i in range(3, 10)]


def test_a_missing_middle_segment_is_reported_not_skipped(tmp_path):
    spool = Spool(tmp_path, segment_bytes=38)
    for i in range(1, 7):
        spool.append("c1", [f"r{i:02d}"])
    segment_files(tmp_path)[1].unlink()  # records 3 and 4 vanish behind the spool's back
    records = spool.read("c1", 1, 6)
    assert next(records) == (1, b"r01")
    with pytest.raises(SpoolError, match="gap"):
        list(records)


@pytest.mark.parametrize("block", [1, 17, 64, 4096])
def test_the_tail_scan_reads_records_across_its_blocks(tmp_path, monkeypatch, block):
    # Records shorter and longer than a block; the scan's answer must not depend on where a
    # block ends, and a bad CRC in the last record still ends the intact run before it.
    monkeypatch.setattr(spool_module, "_SCAN_BLOCK", block)
    payloads = ["x" * (n * 7 % 150) for n in range(60)]
    Spool(tmp_path).append("c1", payloads[:30])
    Spool(tmp_path).append("c1", payloads[30:])
    assert Spool(tmp_path).latest_seq("c1") == 60
    [segment] = segment_files(tmp_path)
    data = bytearray(segment.read_bytes())
    data[-1] ^= 0xFF  # the last record's payload no longer matches its CRC
    segment.write_bytes(bytes(data))
    assert Spool(tmp_path).latest_seq("c1") == 59
