"""The SQLite store shared by several threads and by several processes (driver + API)."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from service.stores import Conflict, DlqQuery, ProcessorRecord
from service.stores.sqlite import SqliteStores

T0 = datetime(2024, 5, 1, tzinfo=UTC)
INCREMENTS = 20
DLQ_DOCS = 100


def _dlq_doc(i: int) -> dict[str, Any]:
    return {
        "_id": f"d{i:04d}",
        "errInfo": {"reason": "r"},
        "operatorName": "Op",
        "dlqTime": T0 + timedelta(milliseconds=i),
        "doc": {"i": i},
    }


def _increment(stores: SqliteStores) -> int:
    """Adds 1 to the processor's ``stats.n`` with compare-and-set; returns the retries needed."""
    retries = 0
    while True:
        current = stores.processors.get("shared")
        try:
            stores.processors.update(current.evolve(stats={"n": current.stats["n"] + 1}))
            return retries
        except Conflict:
            retries += 1


def _work(path: str, offset: int, barrier: Any) -> int:
    """One writer: CAS increments plus DLQ inserts overlapping the other writer's ids."""
    stores = SqliteStores(path)
    try:
        barrier.wait()
        inserted = 0
        dlq = stores.dlq("db", "dlq")
        for i in range(INCREMENTS):
            _increment(stores)
            start = offset + i * (DLQ_DOCS // INCREMENTS)
            inserted += dlq.upsert_many(
                "p", [_dlq_doc(j) for j in range(start, start + DLQ_DOCS // INCREMENTS)]
            )
        return inserted
    finally:
        stores.close()


def _process_entry(path: str, offset: int, barrier: Any, results: Any) -> None:
    results.put(_work(path, offset, barrier))


def _seed(path: Path) -> None:
    stores = SqliteStores(path)
    record = ProcessorRecord.new(name="shared", pipeline_json="[]", options={}, now=T0)
    stores.processors.create(record.evolve(stats={"n": 0}))
    stores.close()


def _check(path: Path, writers: int, inserted: list[int]) -> None:
    stores = SqliteStores(path)
    try:
        assert stores.processors.get("shared").stats["n"] == writers * INCREMENTS
        assert stores.processors.get("shared").version == 1 + writers * INCREMENTS
        distinct = DLQ_DOCS + (writers - 1) * DLQ_DOCS // 2
        assert stores.dlq("db", "dlq").count(DlqQuery(processor="p")) == distinct
        assert sum(inserted) == distinct  # every id counted as new exactly once
    finally:
        stores.close()


def test_threads_share_one_store_without_lost_updates(tmp_path):
    path = tmp_path / "s.db"
    _seed(path)
    barrier = threading.Barrier(4)
    results: list[int] = []
    lock = threading.Lock()

    def run(offset: int) -> None:
        value = _work(str(path), offset, barrier)
        with lock:
            results.append(value)

    threads = [threading.Thread(target=run, args=(n * DLQ_DOCS // 2,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    _check(path, 4, results)


def test_two_processes_share_one_file_without_lost_updates(tmp_path):
    path = tmp_path / "s.db"
    _seed(path)
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter, like a separate service
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_process_entry, args=(str(path), n * DLQ_DOCS // 2, barrier, results))
        for n in range(2)
    ]
    for p in procs:
        p.start()
    inserted = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    _check(path, 2, inserted)


def test_one_store_object_works_in_many_threads(tmp_path):
    stores = SqliteStores(tmp_path / "s.db")
    _seed_shared = ProcessorRecord.new(name="shared", pipeline_json="[]", options={}, now=T0)
    stores.processors.create(_seed_shared.evolve(stats={"n": 0}))
    threads = [
        threading.Thread(target=lambda: [_increment(stores) for _ in range(20)]) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert stores.processors.get("shared").stats["n"] == 80
    stores.close()
