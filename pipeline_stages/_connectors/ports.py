"""Ports: what the sinks need from storage, declared here and provided by the service.

The language never imports the server. A `$merge` or collection `$emit` writer is handed a
callable that opens a `DocumentCollections` (the service passes its `local` store or a
`Cluster` store: the adapters in `service/stores`), and it catches `StoreError`, the base of
every error those adapters raise. The DLQ and the sample buffer are behind the
`BatchWriter` the foreachBatch sink is given (`_stream.batch`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

WhenMatched = Literal["replace", "keepExisting", "merge", "delete"]
WhenNotMatched = Literal["insert", "discard"]


class StoreError(Exception):
    """Base class of every store error.

    Attributes:
        code: Stable snake_case identifier, e.g. ``already_exists``.
        path: JSON-pointer-like location of the offending value ("" when not applicable).
        message: Human-readable explanation.
    """

    default_code = "store_error"

    def __init__(self, message: str, *, path: str = "", code: str | None = None) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.path = path
        self.message = message

    def as_dict(self) -> dict[str, str]:
        """Returns the error as the service-wide ``{code, path, message}`` payload."""
        return {"code": self.code, "path": self.path, "message": self.message}


@dataclass(frozen=True)
class MergeResult:
    """Outcome of one ``DocumentCollections.merge`` call.

    Attributes:
        inserted: Documents inserted (whenNotMatched ``insert``).
        updated: Existing documents replaced or merged into (matched, even if unchanged).
        deleted: Existing documents deleted (whenMatched ``delete``).
        errors: ``(document, message)`` for every document that could not be written; the
            rest of the batch is still applied (MongoDB ``ordered=False``).
    """

    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    errors: tuple[tuple[dict[str, Any], str], ...] = field(default_factory=tuple)


class DocumentCollections(Protocol):
    """The collections a `$merge` (or a collection `$emit`) writes into."""

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

        ``on`` defaults to ``["_id"]``; other fields need :meth:`ensure_unique_index` first.
        Per-document write errors go to ``MergeResult.errors``; failures of the store itself
        raise `StoreError`.
        """
        ...

    def ensure_unique_index(self, db: str, coll: str, fields: Sequence[str]) -> None:
        """Creates a unique ascending index on ``fields`` if none exists."""
        ...


@runtime_checkable
class NewDocumentTexts(Protocol):
    """A store that can take a batch of new documents as the JSON text it keeps (the embedded
    store): what `$merge` on `_id` does with documents whose ids are not stored yet, without
    decoding and encoding each one (`sinks.stored_text`)."""

    def insert_new_texts(self, db: str, coll: str, rows: Sequence[tuple[str, str]]) -> bool:
        """Insert `(_id, document)` rows, both JSON text in the store's own form (`_id` first
        in the document), all in order when none of the ids is stored yet (True), else
        nothing (False)."""
        ...


class KeyedDocuments(Protocol):
    """What `$lookup` and `$cachedLookup` need from a foreign collection's store.

    The executors open it through a `LookupStores` opener the service hands to the compiler
    (it is pickled with the query, so it must be a picklable, process-local opener).
    """

    def find_by_keys(
        self, db: str, coll: str, field: str, keys: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """Documents whose `field` equals one of `keys` (`{field: {$in: keys}}`), in natural
        order, through an index when the store has one. May return a superset (the caller
        re-matches); raises `StoreError` when the store cannot answer."""
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
        """Documents matching a query filter (`$expr` included), sorted and paged."""
        ...


class LookupStores(Protocol):
    """Opens the `KeyedDocuments` of a connection by name, on an executor (cached there)."""

    def __call__(self, connection: str) -> KeyedDocuments:
        """The store of `local` or of a `Cluster` connection."""
        ...
