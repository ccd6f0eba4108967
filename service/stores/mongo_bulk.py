"""Unordered bulk writes with per-operation outcomes, and an emulation for mongomock.

``MongoDocumentStore`` describes its writes as :class:`WriteOp` values and hands them to a
*bulk writer*. The production writer is :func:`bulk_write_unordered` (pymongo
``bulk_write(ordered=False)``). mongomock 4.3 cannot run pymongo 4.20's operation objects
(``TypeError: add_replace() got an unexpected keyword argument 'sort'``), so tests on mongomock
pass :func:`emulate_bulk_write_unordered`, which applies the same operations one by one. The
emulation also works around a mongomock bug: ``replace_one`` that changes ``_id`` applies the
replacement *and then* raises, where a server rejects the write without applying it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pymongo import DeleteOne, InsertOne, ReplaceOne, UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError, PyMongoError

from .codec import canonical_key
from .errors import StoreError


@dataclass(frozen=True)
class WriteOp:
    """One write of a bulk.

    Attributes:
        kind: ``replace`` (ReplaceOne), ``update`` (UpdateOne), ``delete`` (DeleteOne) or
            ``insert`` (InsertOne).
        filter: The match filter (unused for ``insert``).
        doc: Replacement, update document or inserted document (unused for ``delete``).
        upsert: Whether ``replace``/``update`` inserts when nothing matches.
    """

    kind: Literal["replace", "update", "delete", "insert"]
    filter: Mapping[str, Any] = field(default_factory=dict)
    doc: Mapping[str, Any] = field(default_factory=dict)
    upsert: bool = False

    def to_pymongo(self) -> ReplaceOne[Any] | UpdateOne | DeleteOne | InsertOne[Any]:
        """The equivalent pymongo operation object."""
        if self.kind == "replace":
            return ReplaceOne(self.filter, self.doc, upsert=self.upsert)
        if self.kind == "update":
            return UpdateOne(self.filter, self.doc, upsert=self.upsert)
        if self.kind == "delete":
            return DeleteOne(self.filter)
        return InsertOne(self.doc)


@dataclass(frozen=True)
class BulkOutcome:
    """What a bulk did, per operation where the server says so.

    Attributes:
        inserted: Documents inserted, by ``insert`` or by an upsert.
        matched: Documents matched by ``replace``/``update`` (modified or not).
        deleted: Documents deleted.
        upserted: Indexes of the operations that inserted through an upsert.
        errors: Operation index -> server error message.
    """

    inserted: int = 0
    matched: int = 0
    deleted: int = 0
    upserted: frozenset[int] = frozenset()
    errors: Mapping[int, str] = field(default_factory=dict)


BulkWriter = Callable[[Collection[Any], Sequence[WriteOp]], BulkOutcome]


def bulk_write_unordered(collection: Collection[Any], ops: Sequence[WriteOp]) -> BulkOutcome:
    """Runs ``ops`` as one ``bulk_write(ordered=False)``; per-operation errors are returned.

    Raises:
        StoreError: On a write-concern error or any failure that is not per-operation.
    """
    if not ops:
        return BulkOutcome()
    details: Mapping[str, Any]
    try:
        details = collection.bulk_write(
            [op.to_pymongo() for op in ops], ordered=False
        ).bulk_api_result
    except BulkWriteError as exc:
        details = exc.details
    except PyMongoError as exc:
        raise StoreError(f"bulk write failed: {exc}", code="write_failed") from exc
    if details.get("writeConcernErrors"):
        msg = f"write concern not satisfied: {details['writeConcernErrors']}"
        raise StoreError(msg, code="write_concern")
    return BulkOutcome(
        inserted=details.get("nInserted", 0) + details.get("nUpserted", 0),
        matched=details.get("nMatched", 0),
        deleted=details.get("nRemoved", 0),
        upserted=frozenset(u["index"] for u in details.get("upserted", [])),
        errors={e["index"]: str(e.get("errmsg", e)) for e in details.get("writeErrors", [])},
    )


def emulate_bulk_write_unordered(
    collection: Collection[Any], ops: Sequence[WriteOp]
) -> BulkOutcome:
    """Applies ``ops`` one at a time with single-document calls (for mongomock; see module doc)."""
    counts = {"inserted": 0, "matched": 0, "deleted": 0}
    upserted: set[int] = set()
    errors: dict[int, str] = {}
    for index, op in enumerate(ops):
        try:
            _apply_one(collection, op, counts, upserted, index)
        except PyMongoError as exc:
            errors[index] = str(exc)
    return BulkOutcome(**counts, upserted=frozenset(upserted), errors=errors)


def _apply_one(
    collection: Collection[Any],
    op: WriteOp,
    counts: dict[str, int],
    upserted: set[int],
    index: int,
) -> None:
    if op.kind == "insert":
        collection.insert_one(dict(op.doc))
        counts["inserted"] += 1
        return
    if op.kind == "delete":
        counts["deleted"] += collection.delete_one(op.filter).deleted_count
        return
    if op.kind == "replace":
        _check_replacement_keeps_id(collection, op)
        result = collection.replace_one(op.filter, dict(op.doc), upsert=op.upsert)
    else:
        result = collection.update_one(op.filter, op.doc, upsert=op.upsert)
    counts["matched"] += result.matched_count
    if result.upserted_id is not None:
        counts["inserted"] += 1
        upserted.add(index)


def _check_replacement_keeps_id(collection: Collection[Any], op: WriteOp) -> None:
    if "_id" not in op.doc:
        return
    current = collection.find_one(op.filter, {"_id": 1})
    if current is not None and canonical_key(current["_id"]) != canonical_key(op.doc["_id"]):
        msg = (
            "After applying the update, the (immutable) field '_id' was found to have been "
            f"altered to _id: {op.doc['_id']!r}"
        )
        raise _ImmutableIdError(msg)


class _ImmutableIdError(PyMongoError):
    """What a server reports (code 66, ImmutableField) for a replacement that changes ``_id``."""
