"""DLQ replay (`POST /processors/{name}/dlq:replay`): DLQ records back into a stream.

A replayed record is the DLQ record's original document (`doc`, or `docText` when it was
stored as text), appended to an `HttpIngest` connection's spool exactly as the ingest route
appends a posted record, so it enters every processor reading that connection as if it arrived
now (its event time is still the document's own). The target is that connection, or a
processor whose `$source` reads one.

At most once per target: each DLQ record replayed gets the target in `replayedTo` (and
`replayedAt`), and a replay selects only records without that mark, so a retried request, or
one after a restart, skips what was done (`skipped`). Replays to one target are serialised in
the process. The record is written to the spool (fsync) before it is marked: a crash between
the two, and only that, replays that chunk again on the next request.

Records stream in chunks of `CHUNK` (never all in memory). A replay without `to` stops at the
records that were in the DLQ when it began, so records dead-lettered meanwhile (perhaps by
the replay itself, into the same processor) are not picked up in a loop. A document that is
not a JSON object the ingest source can read (input that was not JSON, or text cut short) is
counted in `notReplayable` and left unmarked.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._base import Problem
from pipeline_stages._connectors.sources.records import record_problem
from pipeline_stages._stream.batch import DOC_TEXT
from service.errors import ConcurrentModification, RequestInvalid
from service.manager.connections import ConnectionRegistry
from service.manager.dlq import DlqFilters, DlqTargets
from service.manager.ingest import IngestService
from service.stores import DlqQuery, DlqStore, ProcessorRecord, Stores, to_relaxed_ejson

#: DLQ records read, written and marked per step.
CHUNK = 500


@dataclass(frozen=True)
class ReplayResult:
    """Counts of one replay (see `DlqReplayed`)."""

    replayed: int = 0
    skipped: int = 0
    not_replayable: int = 0


def replay_payload(record: dict[str, Any]) -> bytes | None:
    """The bytes to spool for a DLQ record, or None when its document cannot be replayed."""
    doc = record.get("doc")
    if isinstance(doc, dict):
        try:
            text = json.dumps(to_relaxed_ejson(doc), ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return None
        raw = text.encode("utf-8", "surrogatepass")
    elif "doc" not in record and isinstance(record.get(DOC_TEXT), str):
        raw = record[DOC_TEXT].encode("utf-8", "surrogatepass")
    else:
        return None
    return raw if record_problem(raw) is None else None


def _target_problem(message: str) -> RequestInvalid:
    return RequestInvalid(message, problems=[Problem("invalid_target", "/target", message)])


class DlqReplayer:
    """Replays a processor's DLQ records into an HttpIngest connection (module docstring)."""

    def __init__(
        self,
        *,
        stores: Stores,
        dlq_targets: DlqTargets,
        connections: ConnectionRegistry,
        ingest: IngestService,
    ) -> None:
        self._stores = stores
        self._dlq_targets = dlq_targets
        self._connections = connections
        self._ingest = ingest
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def connection_of(self, *, processor: str | None, connection: str | None) -> str:
        """The HttpIngest connection a target writes to; 422 at `/target` otherwise."""
        if processor is not None:
            record = self._stores.processors.get(processor)
            if record is None:
                raise _target_problem(f"no processor named {processor!r}")
            connection = _source_connection(json.loads(record.pipeline_json))
            if connection is None:
                raise _target_problem(f"processor {processor!r} has no $source.connectionName")
        name = str(connection)
        kind = self._connections.type_of(name)
        if kind is None:
            raise _target_problem(f"no connection named {name!r}")
        if kind != "HttpIngest":
            raise _target_problem(
                f"connection {name!r} is a {kind} connection; replay writes to HttpIngest "
                "connections (or processors reading one)"
            )
        return name

    def replay(
        self,
        record: ProcessorRecord,
        filters: DlqFilters,
        *,
        target: str,
        connection: str,
        dry_run: bool,
    ) -> ReplayResult:
        """Replay the matching records not yet replayed to `target` (a `replayedTo` key)."""
        store = self._dlq_targets.store_of(record)
        started = datetime.now(UTC)
        if filters.dlq_to is None:
            filters = replace(filters, dlq_to=started)
        query = self._dlq_targets.query(record, replace(filters, limit=None, skip=0))
        with self._lock_for(target):
            skipped = store.count(query.model_copy(update={"replayed_to": target}))
            pending = query.model_copy(update={"not_replayed_to": target, "limit": CHUNK})
            if dry_run:
                replayed, bad = _count(store, pending)
            else:
                replayed, bad = self._write(
                    store, pending, record.name, target, connection, started
                )
        return ReplayResult(replayed=replayed, skipped=skipped, not_replayable=bad)

    def _write(
        self,
        store: DlqStore,
        pending: DlqQuery,
        processor: str,
        target: str,
        connection: str,
        at: datetime,
    ) -> tuple[int, int]:
        replayed = bad = 0
        while True:
            # Marked records leave the selection; unreplayable ones stay, ahead of the rest.
            docs, _ = store.find(pending.model_copy(update={"skip": bad}))
            if not docs:
                return replayed, bad
            payloads = [(doc["_id"], replay_payload(doc)) for doc in docs]
            good = [(i, p) for i, p in payloads if p is not None]
            bad += len(payloads) - len(good)
            if good:
                self._ingest.append_documents(connection, [p for _, p in good])
                marked = store.mark_replayed(processor, [i for i, _ in good], target=target, at=at)
                if marked == 0:
                    # Someone else (another service on this store) marked them meanwhile:
                    # stop rather than select and write the same records again.
                    raise ConcurrentModification(
                        f"the DLQ records were replayed to {target} concurrently; retry"
                    )
                replayed += marked

    def _lock_for(self, target: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(target, threading.Lock())


def _count(store: DlqStore, pending: DlqQuery) -> tuple[int, int]:
    good = bad = offset = 0
    while True:
        docs, _ = store.find(pending.model_copy(update={"skip": offset}))
        if not docs:
            return good, bad
        offset += len(docs)
        usable = sum(1 for doc in docs if replay_payload(doc) is not None)
        good, bad = good + usable, bad + len(docs) - usable


def _source_connection(pipeline: Any) -> str | None:
    source = pipeline[0].get("$source") if pipeline and isinstance(pipeline[0], dict) else None
    name = source.get("connectionName") if isinstance(source, dict) else None
    return name if isinstance(name, str) else None
