"""`ProcessorRecords`: the processors' stored records, each behind its own lock.

Every change to a processor's record holds that processor's lock, re-reads the record and
saves it with the metadata store's compare-and-set (`save`), so the API's lifecycle calls and
a run's supervisor (a failure, an error, its stats) never overwrite each other. The run's
callbacks (`mark_failed`, `report_error`, `persist_stats`) only touch a processor that is
still STARTED: one stopped or dropped meanwhile keeps what the API gave it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from service.errors import ConcurrentModification, ProcessorExists, ProcessorNotFound, SluiceError
from service.manager.runs import Run
from service.manager.states import State
from service.manager.stats import utc_now
from service.stores import (
    AlreadyExists,
    Conflict,
    NotFound,
    ProcessorError,
    ProcessorRecord,
    Stores,
)

log = logging.getLogger("sluice.service")

_PAGE = 500


def failed(
    record: ProcessorRecord,
    code: str,
    message: str,
    stats: Mapping[str, Any],
    *,
    retries: int | None = None,
) -> ProcessorRecord:
    """The record moved to FAILED now, with its error and last stats."""
    now = utc_now()
    return record.evolve(
        state=State.FAILED,
        error={"code": code, "message": message, "time": now, "retries": retries},
        stats=dict(stats),
        last_state_change=now,
    )


class ProcessorRecords:
    """See the module docstring."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores
        self._locks: dict[str, threading.RLock] = {}
        self._guard = threading.Lock()

    def lock_for(self, processor_id: str) -> threading.RLock:
        """The processor's lock (one per id, made on first use)."""
        with self._guard:
            return self._locks.setdefault(processor_id, threading.RLock())

    def forget_lock(self, processor_id: str) -> None:
        """Drop a deleted processor's lock."""
        with self._guard:
            self._locks.pop(processor_id, None)

    def get(self, name: str) -> ProcessorRecord:
        """The named processor; `ProcessorNotFound` otherwise."""
        record = self._stores.processors.get(name)
        if record is None:
            raise ProcessorNotFound(name)
        return record

    @contextmanager
    def locked(self, name: str) -> Iterator[ProcessorRecord]:
        """The named processor, re-read under its lock (held for the `with` block)."""
        record = self.get(name)
        with self.lock_for(record.id):
            fresh = self._stores.processors.get_by_id(record.id)
            if fresh is None or fresh.name != name:
                raise ProcessorNotFound(name)
            yield fresh

    def reload(self, record: ProcessorRecord) -> ProcessorRecord:
        """The stored version of `record`; `ProcessorNotFound` if it was deleted."""
        fresh = self._stores.processors.get_by_id(record.id)
        if fresh is None:
            raise ProcessorNotFound(record.name)
        return fresh

    def save(self, record: ProcessorRecord) -> ProcessorRecord:
        """Store `record` if nobody changed it since it was read (compare-and-set)."""
        try:
            return self._stores.processors.update(record)
        except Conflict:
            raise ConcurrentModification(
                f"processor {record.name!r} was changed concurrently; retry"
            ) from None
        except AlreadyExists:
            raise ProcessorExists(record.name) from None
        except NotFound:
            raise ProcessorNotFound(record.name) from None

    def all(self) -> Iterator[ProcessorRecord]:
        """Every stored processor, page by page."""
        offset = 0
        while True:
            page, total = self._stores.processors.list(offset=offset, limit=_PAGE)
            yield from page
            offset += len(page)
            if not page or offset >= total:
                return

    def started(self) -> list[ProcessorRecord]:
        """The processors stored as STARTED."""
        return [r for r in self.all() if r.state is State.STARTED]

    # ------------------------------------------------------------------ a run's callbacks

    def mark_failed(self, run: Run, code: str, message: str) -> None:
        """Move the run's processor to FAILED (the supervisor gave up on it)."""
        with self.lock_for(run.processor_id):
            record = self._stores.processors.get_by_id(run.processor_id)
            if record is None or record.state is not State.STARTED:
                return
            self.save(failed(record, code, message, run.stats.to_record(), retries=run.retries))

    def report_error(self, run: Run) -> None:
        """Record a run's last failure on its STARTED processor as it happens (supervisor)."""
        error = run.last_error
        if error is None:
            return
        with self.lock_for(run.processor_id):
            record = self._stores.processors.get_by_id(run.processor_id)
            if record is None or record.state is not State.STARTED:
                return
            stored = ProcessorError(
                code=error.code, message=error.message, time=error.time, retries=run.retries
            )
            self.save(record.evolve(error=stored.model_dump()))

    def persist_stats(self, run: Run, *, wait: bool = False) -> None:
        """Save the run's stats on its record; without `wait`, skip if the lock is busy
        (the next progress saves them)."""
        lock = self.lock_for(run.processor_id)
        if not lock.acquire(blocking=wait):
            return
        try:
            record = self._stores.processors.get_by_id(run.processor_id)
            if record is not None:
                self.save(record.evolve(stats=run.stats.to_record()))
        except SluiceError as error:
            log.warning("saving stats of %s: %s", run.name, error.detail)
        finally:
            lock.release()
