"""Checkpoint locks (one driver per checkpoint, orphan JVMs killed) and the HttpIngest reader."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pipeline_stages._connectors.sources.arrow_records import raw_rows
from pipeline_stages._connectors.sources.http_ingest import (
    HttpIngestStreamReader,
    decode_record,
    encode_record,
)
from service.manager.positions import START_FILE, pin_start_positions
from service.runtime.engine import Connection
from service.runtime.locks import CheckpointBusy, CheckpointLock, process_start_ticks
from service.stores import Spool


def test_one_driver_per_checkpoint(tmp_path: Path) -> None:
    first = CheckpointLock(tmp_path / "p")
    first.acquire(pid=1, jvm_pid=0)
    with pytest.raises(CheckpointBusy):
        CheckpointLock(tmp_path / "p").acquire(pid=2, jvm_pid=0)
    first.release()
    assert json.loads((tmp_path / "p" / "driver.lock").read_text()) == {}
    second = CheckpointLock(tmp_path / "p")
    second.acquire(pid=2, jvm_pid=0)
    second.release()


def test_an_orphan_jvm_from_an_unclean_exit_is_killed(tmp_path: Path) -> None:
    orphan = subprocess.Popen(["sleep", "60"])  # stands in for a JVM whose driver was killed
    try:
        lock = tmp_path / "p" / "driver.lock"
        lock.parent.mkdir()
        record = {
            "pid": 999_999_999,
            "jvmPid": orphan.pid,
            "jvmStart": process_start_ticks(orphan.pid),
        }
        lock.write_text(json.dumps(record))
        killed = CheckpointLock(tmp_path / "p").acquire(pid=12345, jvm_pid=0)
        assert killed == orphan.pid
        assert orphan.wait(timeout=10) == -9
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


def test_a_recycled_pid_is_never_killed(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        lock = tmp_path / "p" / "driver.lock"
        lock.parent.mkdir()
        stale_start = (process_start_ticks(bystander.pid) or 0) - 1
        lock.write_text(
            json.dumps({"pid": 999_999_999, "jvmPid": bystander.pid, "jvmStart": stale_start})
        )
        assert CheckpointLock(tmp_path / "p").acquire(pid=12345, jvm_pid=0) is None
        with pytest.raises(subprocess.TimeoutExpired):  # still running: it was not signalled
            bystander.wait(timeout=0.1)
    finally:
        bystander.kill()
        bystander.wait()


def reader(tmp_path: Path, start: int = 0, per_batch: int = 2) -> HttpIngestStreamReader:
    options = {
        "datadir": str(tmp_path),
        "connection": "in1",
        "startseq": str(start),
        "maxrecordsperbatch": str(per_batch),
    }
    return HttpIngestStreamReader(options)


def test_the_reader_walks_the_spool_by_sequence_number(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append(
        "in1",
        [
            encode_record(b'{"a": 1.5}', 1000),
            encode_record(b"oops", 2000),
            encode_record(b"{}", 3000),
        ],
    )
    source = reader(tmp_path, start=0, per_batch=2)
    start = source.initialOffset()
    assert start == {"seq": 0}
    end = source.latestOffset(start, source.getDefaultReadLimit())
    assert end == {"seq": 2}
    assert source.latestOffset(end, ReadAllAvailable()) == {"seq": 3}
    (partition,) = source.partitions(start, end)
    rows = raw_rows(source.read(partition))
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (0, 1, '{"a": 1.5e0}', 1000),
        (0, 2, "oops", 2000),
    ]
    assert json.loads(rows[0][4]) == {"type": "httpIngest", "connectionName": "in1", "seq": 1}
    assert source.partitions(end, end) == []
    assert reader(tmp_path, start=3).latestOffset({"seq": 3}, ReadMaxRows(5)) == {"seq": 3}


def test_records_keep_their_arrival_time() -> None:
    assert decode_record(encode_record(b'{"x": 1}', 1_700_000_000_123)) == (
        1_700_000_000_123,
        b'{"x": 1}',
    )


def test_start_positions_are_pinned_per_checkpoint(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append("in1", [b"a", b"b"])
    pipeline = [{"$source": {"connectionName": "in1"}}]
    connections = {"in1": Connection("in1", "HttpIngest", {})}
    first = pin_start_positions(pipeline, connections, checkpoint_dir=tmp_path / "g1", spool=spool)
    spool.append("in1", [b"c"])
    again = pin_start_positions(pipeline, connections, checkpoint_dir=tmp_path / "g1", spool=spool)
    fresh = pin_start_positions(pipeline, connections, checkpoint_dir=tmp_path / "g2", spool=spool)
    assert [c["in1"].config["startSeq"] for c in (first, again, fresh)] == [2, 2, 3]
    assert json.loads((tmp_path / "g1" / START_FILE).read_text()) == {"in1": 2}
    other = pin_start_positions(
        [{"$source": {"connectionName": "sample_stream_solar"}}],
        connections,
        checkpoint_dir=tmp_path / "g3",
        spool=spool,
    )
    assert other == connections and not (tmp_path / "g3").exists()


class FakeQuery:
    """A `StreamingQuery` that runs until stopped and never fails by itself."""

    id = "q1"
    name = "p (q1)"

    def __init__(self) -> None:
        self.isActive = True  # noqa: N815 - PySpark's name
        self.stops = 0

    def stop(self) -> None:
        self.isActive = False
        self.stops += 1

    def exception(self) -> None:
        return None


class FakeSink:
    """A `ForeachBatchSink` whose background fold may have failed."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.closed = 0

    def close(self) -> BaseException | None:
        self.closed += 1
        return self.failure


def test_a_failed_window_fold_stops_the_query_and_is_its_failure() -> None:
    from service.runtime.spark_engine import SparkQueryHandle

    query, sink = FakeQuery(), FakeSink()
    handle = SparkQueryHandle(query, sink)
    assert handle.is_active() and handle.failure() is None
    # The fold failed: the query would only fail at its next batch, which may never come.
    sink.failure = OSError("no space left on device")
    assert not handle.is_active()
    assert (query.stops, sink.closed) == (1, 1)
    assert handle.failure() == "the window fold failed: no space left on device"


def test_stopping_a_query_waits_for_its_sinks_last_write() -> None:
    from service.runtime.spark_engine import SparkQueryHandle

    query, sink = FakeQuery(), FakeSink()
    SparkQueryHandle(query, sink).stop()
    assert (query.stops, sink.closed) == (1, 1)
