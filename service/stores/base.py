"""The stores' typed records, queries and interfaces (Protocols).

Two implementations exist: :mod:`service.stores.sqlite` (embedded default) and
:mod:`service.stores.mongo` (pymongo). Both pass one contract suite
(``tests/contract/test_store_contract.py``). Value rules (aware datetimes, millisecond
truncation, the in-memory document form) live in :mod:`service.stores.codec`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Protocol, Self

from bson import ObjectId
from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from pipeline_stages._connectors.ports import (
    DocumentCollections,
    MergeResult,
    WhenMatched,
    WhenNotMatched,
)

from .codec import normalize_document, normalize_filter, utc_ms
from .redact import redact
from .stats_ledger import StatsLedger

#: Names usable as directory names (the HTTP-ingest spool) and in URLs.
CONNECTION_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"

UtcMs = Annotated[AwareDatetime, AfterValidator(utc_ms)]
"""An aware datetime, stored in UTC with millisecond precision."""

Document = Annotated[dict[str, Any], AfterValidator(normalize_document)]
"""A JSON-like object in the in-memory form of :mod:`service.stores.codec`."""


class ProcessorState(StrEnum):
    """Lifecycle states as the Atlas Admin API names them (atlas-semantics.md §7.1)."""

    CREATED = "CREATED"
    STARTED = "STARTED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"


class ConnectionType(StrEnum):
    """Connection kinds Sluice understands."""

    KAFKA = "Kafka"
    CLUSTER = "Cluster"
    HTTP_INGEST = "HttpIngest"
    SAMPLE = "Sample"
    FILE = "File"
    HTTPS = "Https"
    LOCAL = "Local"


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def evolve(self, **changes: Any) -> Self:
        """A validated copy with ``changes`` applied.

        Prefer this to ``model_copy(update=...)``, which skips validation (a naive datetime
        or a misspelt state would slip through; the stores re-validate and reject them).
        """
        return self.model_validate({**self.model_dump(), **changes})


class ProcessorError(_Record):
    """A processor's last failure: ``{code, message, time, retries}``.

    Set when the processor becomes ``FAILED``, and while a ``STARTED`` processor's query is
    being restarted after failures (``retries``: restarts scheduled so far), so a processor in
    a restart loop shows its error as it happens. Cleared by start and stop.
    """

    code: str
    message: str
    time: UtcMs | None = None
    retries: Annotated[int, Field(ge=0)] | None = None


class ProcessorRecord(_Record):
    """A persisted stream processor.

    Attributes:
        id: 24 lower-case hex digits, like an ObjectId (:func:`new_record_id`).
        name: Unique processor name.
        pipeline_json: The pipeline exactly as the user sent it. It is kept as text so key
            order and ``10`` vs ``10.0`` survive (atlas-semantics.md §2); it must parse as JSON.
        options: Processor options, e.g. ``{"dlq": {"connectionName", "db", "coll"}}``.
        state: Lifecycle state.
        error: Last failure, or None.
        created_at: Creation time (UTC, ms).
        last_state_change: Time of the last state change (UTC, ms).
        stats: Last known stats (same content as Atlas ``stats``).
        generation: Bumped on modify or fresh start; names the checkpoint directory.
        version: Optimistic-concurrency version; stores set it (1 on create, +1 per update).
    """

    id: Annotated[str, Field(pattern=r"^[0-9a-f]{24}$")]
    name: Annotated[str, Field(min_length=1, max_length=256)]
    pipeline_json: str
    options: Document = Field(default_factory=dict)
    state: ProcessorState = ProcessorState.CREATED
    error: ProcessorError | None = None
    created_at: UtcMs
    last_state_change: UtcMs
    stats: Document = Field(default_factory=dict)
    generation: Annotated[int, Field(ge=0)] = 1
    version: Annotated[int, Field(ge=1)] = 1

    @field_validator("pipeline_json")
    @classmethod
    def _must_be_json(cls, text: str) -> str:
        json.loads(text)  # raises ValueError (JSONDecodeError), reported by pydantic
        return text

    @classmethod
    def new(
        cls, *, name: str, pipeline_json: str, options: Mapping[str, Any] | None, now: datetime
    ) -> ProcessorRecord:
        """A fresh ``CREATED`` record with a new id, generation 1 and version 1."""
        return cls(
            id=new_record_id(),
            name=name,
            pipeline_json=pipeline_json,
            options=dict(options or {}),
            created_at=now,
            last_state_change=now,
        )


class ConnectionRecord(_Record):
    """A named connection in the registry.

    ``config`` holds everything, secrets included; use :meth:`public` for anything that
    leaves the service.
    """

    name: Annotated[str, Field(pattern=CONNECTION_NAME_PATTERN)]
    type: ConnectionType
    config: Document = Field(default_factory=dict)
    created_at: UtcMs

    def public(self) -> ConnectionRecord:
        """A copy whose ``config`` has every secret removed (see :mod:`.redact`)."""
        return self.model_copy(update={"config": redact(self.config)})


def _check_filter(query: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if query is None else normalize_filter(query)


class DlqQuery(_Record):
    """Which DLQ documents to find, count or purge.

    All conditions are ANDed. Results are ordered by ``dlqTime`` then ``_id`` (a total order,
    so offset paging is stable), newest first when ``newest_first``.

    Attributes:
        processor: ``processorName`` to match (exact).
        reason: ``errInfo.reason`` to match **exactly** (indexed). For a substring or pattern
            use ``filter={"errInfo.reason": {"$regex": ...}}``.
        operator_name: ``operatorName`` to match exactly.
        dlq_time_from: Inclusive lower bound on ``dlqTime``.
        dlq_time_to: Exclusive upper bound on ``dlqTime``.
        filter: Extra MQL filter on the documents (e.g. ``{"doc.user.id": {"$in": [1, 2]}}``).
            MongoDB evaluates it on the server; SQLite evaluates it in Python with mongomock's
            matcher on the rows the other conditions select.
        skip: Documents to skip (find only).
        limit: Maximum documents to return (find only); None means no limit.
        newest_first: Sort descending instead of ascending.
        reason_contains: ``errInfo.reason`` contains this text, ignoring case.
        replayed: True: replayed to some target (``replayedTo`` is not empty); False: never.
        replayed_to: ``replayedTo`` holds this target (e.g. ``processor:p2``).
        not_replayed_to: ``replayedTo`` does not hold this target (what a replay selects).
    """

    processor: Annotated[str, Field(min_length=1)]
    reason: str | None = None
    reason_contains: Annotated[str | None, Field(min_length=1)] = None
    replayed: bool | None = None
    replayed_to: str | None = None
    not_replayed_to: str | None = None
    operator_name: str | None = None
    dlq_time_from: UtcMs | None = None
    dlq_time_to: UtcMs | None = None
    filter: Annotated[dict[str, Any] | None, AfterValidator(_check_filter)] = None
    skip: Annotated[int, Field(ge=0)] = 0
    limit: Annotated[int | None, Field(ge=0)] = None
    newest_first: bool = False


def new_record_id() -> str:
    """A new 24-hex id (an ObjectId's hex: time-ordered and unique across processes)."""
    return str(ObjectId())


class ProcessorStore(Protocol):
    """Persisted processors, keyed by unique ``name`` and ``id``."""

    def create(self, record: ProcessorRecord) -> ProcessorRecord:
        """Stores a new record with version 1 and returns it. Raises AlreadyExists."""
        ...

    def get(self, name: str) -> ProcessorRecord | None:
        """The processor called ``name``, or None."""
        ...

    def get_by_id(self, processor_id: str) -> ProcessorRecord | None:
        """The processor with id ``processor_id``, or None."""
        ...

    def update(self, record: ProcessorRecord) -> ProcessorRecord:
        """Compare-and-set on ``record.version``; returns the record with version + 1.

        Raises NotFound (id gone), Conflict (version moved on) or AlreadyExists (renamed
        onto another processor's name).
        """
        ...

    def delete(self, name: str) -> bool:
        """Deletes the processor; False if there was none."""
        ...

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[list[ProcessorRecord], int]:
        """A page ordered by ``(created_at, id)`` and the total count."""
        ...


class ConnectionStore(Protocol):
    """The connection registry, keyed by unique ``name``."""

    def create(self, record: ConnectionRecord) -> ConnectionRecord:
        """Stores a new connection. Raises AlreadyExists."""
        ...

    def get(self, name: str) -> ConnectionRecord | None:
        """The connection called ``name`` (secrets included), or None."""
        ...

    def delete(self, name: str) -> bool:
        """Deletes the connection; False if there was none."""
        ...

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[list[ConnectionRecord], int]:
        """A page ordered by name and the total count."""
        ...


class StatsStore(Protocol):
    """Per-processor counts recorded per micro-batch, idempotent per batch id
    (:mod:`.stats_ledger`)."""

    def get(self, processor_id: str) -> StatsLedger | None:
        """The processor's ledger, or None before its first recorded batch."""
        ...

    def record(
        self,
        processor_id: str,
        lane: str,
        generation: int,
        batch_id: int,
        part: Mapping[str, Any],
        *,
        seed: Mapping[str, Any] | None = None,
    ) -> StatsLedger:
        """Record one batch's counts in a lane and return the stored ledger.

        A replayed batch id replaces its earlier counts, an older one changes nothing.
        ``seed`` (a persisted stats document) starts a processor's first ledger.
        """
        ...

    def delete(self, processor_id: str) -> bool:
        """Forget a processor's ledger; False if there was none."""
        ...


class DlqStore(Protocol):
    """One DLQ collection (``db.coll``), holding Atlas-shaped DLQ documents (§6.2)."""

    def upsert_many(self, processor: str, docs: Sequence[Mapping[str, Any]]) -> int:
        """Inserts documents whose ``_id`` is not stored yet; returns how many were new.

        An ``_id`` that exists already is left unchanged (first write wins), so replaying a
        micro-batch neither duplicates nor reorders records. Raises InvalidDocument.
        """
        ...

    def find(self, query: DlqQuery) -> tuple[list[dict[str, Any]], int]:
        """A page of matching documents and the total match count (ignoring skip/limit)."""
        ...

    def count(self, query: DlqQuery) -> int:
        """How many documents match (skip and limit are ignored)."""
        ...

    def purge(self, query: DlqQuery) -> int:
        """Deletes every match and returns the number deleted. Skip/limit must be unset."""
        ...

    def mark_replayed(
        self, processor: str, ids: Sequence[str], *, target: str, at: datetime
    ) -> int:
        """Adds ``target`` to ``replayedTo`` and sets ``replayedAt`` on the records among
        ``ids`` not yet replayed to it; returns how many were marked."""
        ...


class DocumentStore(DocumentCollections, Protocol):
    """Collections written by ``$merge`` (the embedded ``local`` connection or a cluster)."""

    def merge(
        self,
        db: str,
        coll: str,
        docs: Sequence[Mapping[str, Any]],
        *,
        on: Sequence[str] | None = None,
        when_matched: WhenMatched = "merge",
        when_not_matched: WhenNotMatched = "insert",
    ) -> MergeResult:
        """Applies documents with MongoDB ``$merge`` semantics, in order.

        ``on`` defaults to ``["_id"]``; other fields need :meth:`ensure_unique_index` first
        (MissingUniqueIndex otherwise). A document without ``_id`` gets an ObjectId when it
        is inserted. Per-document write errors go to ``MergeResult.errors``.
        """
        ...

    def ensure_unique_index(self, db: str, coll: str, fields: Sequence[str]) -> None:
        """Creates a unique ascending index on ``fields`` if none exists."""
        ...

    def find(
        self,
        db: str,
        coll: str,
        filter: Mapping[str, Any] | None = None,
        *,
        sort: Sequence[tuple[str, int]] | None = None,
        skip: int = 0,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Matching documents; insertion order unless ``sort`` is given."""
        ...

    def count(self, db: str, coll: str, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match."""
        ...

    def drop(self, db: str, coll: str) -> None:
        """Deletes the collection and its indexes (no error if absent)."""
        ...
