"""``$merge`` targets on MongoDB: unordered bulk writes with per-document errors.

Each ``(whenMatched, whenNotMatched)`` pair maps to one operation per document:

================  ==========  =====================================================
whenMatched       notMatched  operation
================  ==========  =====================================================
replace           insert      ``ReplaceOne(on, doc, upsert=True)``
replace           discard     ``ReplaceOne(on, doc)``
merge             insert      ``UpdateOne(on, {$set: doc}, upsert=True)``
merge             discard     ``UpdateOne(on, {$set: doc})``
keepExisting      insert      ``UpdateOne(on, {$setOnInsert: doc}, upsert=True)``
keepExisting      discard     nothing to write
delete            discard     ``DeleteOne(on)``
delete            insert      ``UpdateOne(on, {$setOnInsert: doc}, upsert=True)``, then
                              ``DeleteOne(on)`` for the documents that matched
================  ==========  =====================================================

Batches run in rounds (:mod:`.merge_plan`) so repeated keys apply in input order.
Known gap: ``merge`` uses ``$set``, so a field name containing ``.`` is read as a path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection
from pymongo.errors import OperationFailure, PyMongoError

from .base import MergeResult, WhenMatched, WhenNotMatched
from .codec import normalize_filter
from .errors import InvalidQuery, MissingUniqueIndex, StoreError
from .merge_plan import MergeItem, check_modes, on_fields, plan, rounds, sort_errors
from .mongo_bulk import BulkOutcome, BulkWriter, WriteOp, bulk_write_unordered
from .mql_python import check_sort
from .rules import check_namespace, check_paging


class MongoDocumentStore:
    """:class:`~service.stores.base.DocumentStore` on any pymongo-compatible client.

    Args:
        client: A ``MongoClient`` created with ``tz_aware=True`` (or a mongomock client).
        bulk_writer: How bulks run; mongomock needs
            :func:`~service.stores.mongo_bulk.emulate_bulk_write_unordered`.
        reserved: ``(db, coll)`` namespaces this store must never write (Sluice's metadata).
    """

    def __init__(
        self,
        client: Any,
        *,
        bulk_writer: BulkWriter = bulk_write_unordered,
        reserved: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self._client = client
        self._bulk = bulk_writer
        self._reserved = reserved
        self._unique_ok: set[tuple[str, str, frozenset[str]]] = set()

    def ensure_unique_index(self, db: str, coll: str, fields: Sequence[str]) -> None:
        """Creates a unique ascending index on ``fields`` (no-op if it exists)."""
        names = on_fields(fields)
        if names == ("_id",):
            return
        try:
            self._collection(db, coll).create_index([(f, ASCENDING) for f in names], unique=True)
        except PyMongoError as exc:
            raise StoreError(
                f"cannot create the unique index: {exc}", code="duplicate_key"
            ) from exc
        self._unique_ok.add((db, coll, frozenset(names)))

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
        """Applies documents with MongoDB ``$merge`` semantics (see the module table)."""
        collection = self._collection(db, coll)
        check_modes(when_matched, when_not_matched)
        fields = on_fields(on)
        if fields != ("_id",):
            self._require_unique_index(collection, db, coll, fields)
        items, errors = plan(docs, fields)
        totals = {"inserted": 0, "updated": 0, "deleted": 0}
        if when_matched == "keepExisting" and when_not_matched == "discard":
            items = []  # this combination never writes anything
        for batch in rounds(items):
            self._run_round(collection, batch, when_matched, when_not_matched, totals, errors)
        return MergeResult(**totals, errors=sort_errors(errors))

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
        """Matching documents; natural order unless ``sort`` is given."""
        check_paging(offset=skip, limit=limit)
        if limit == 0:
            return []  # pymongo reads limit 0 as "no limit"
        collection = self._collection(db, coll, reading=True)
        order = check_sort(sort)
        cursor = collection.find(normalize_filter(filter)).skip(skip)
        if order:
            cursor = cursor.sort(order)
        if limit is not None:
            cursor = cursor.limit(limit)
        return list(run_query(lambda: list(cursor)))

    def find_by_keys(
        self, db: str, coll: str, field: str, keys: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """Documents whose ``field`` equals one of ``keys``: one ``$in`` query (the server
        picks the field's index when there is one; the `$lookup` port)."""
        if not keys:
            return []
        return self.find(db, coll, {field: {"$in": list(keys)}})

    def count(self, db: str, coll: str, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match."""
        collection = self._collection(db, coll, reading=True)
        query = normalize_filter(filter)
        return int(run_query(lambda: collection.count_documents(query)))

    def drop(self, db: str, coll: str) -> None:
        """Drops the collection and its indexes."""
        self._collection(db, coll).drop()
        self._unique_ok = {k for k in self._unique_ok if k[:2] != (db, coll)}

    def _collection(self, db: str, coll: str, *, reading: bool = False) -> Collection[Any]:
        check_namespace(db, coll)
        if not reading and (db, coll) in self._reserved:
            raise InvalidQuery(f"{db}.{coll} holds Sluice's own metadata", path="/coll")
        collection: Collection[Any] = self._client[db][coll]
        return collection

    def _require_unique_index(
        self, collection: Collection[Any], db: str, coll: str, fields: tuple[str, ...]
    ) -> None:
        key = (db, coll, frozenset(fields))
        if key in self._unique_ok:
            return
        for spec in collection.index_information().values():
            if spec.get("unique") and {f for f, _ in spec["key"]} == set(fields):
                self._unique_ok.add(key)
                return
        msg = (
            f"$merge on {list(fields)} needs a unique index on exactly those fields in {db}.{coll}"
        )
        raise MissingUniqueIndex(msg, path="/on")

    def _run_round(
        self,
        collection: Collection[Any],
        batch: list[MergeItem],
        when_matched: str,
        when_not_matched: str,
        totals: dict[str, int],
        errors: list[tuple[int, dict[str, Any], str]],
    ) -> None:
        outcome = self._write(
            collection,
            batch,
            [_operation(i, when_matched, when_not_matched) for i in batch],
            errors,
        )
        totals["inserted"] += outcome.inserted
        if when_matched in ("replace", "merge"):
            totals["updated"] += outcome.matched
        elif when_matched == "delete" and when_not_matched == "discard":
            totals["deleted"] += outcome.deleted
        elif when_matched == "delete":
            matched = [
                item
                for n, item in enumerate(batch)
                if n not in outcome.upserted and n not in outcome.errors
            ]
            deletes = [WriteOp("delete", filter=item.filter) for item in matched]
            totals["deleted"] += self._write(collection, matched, deletes, errors).deleted

    def _write(
        self,
        collection: Collection[Any],
        batch: list[MergeItem],
        ops: list[WriteOp],
        errors: list[tuple[int, dict[str, Any], str]],
    ) -> BulkOutcome:
        outcome = self._bulk(collection, ops)
        errors.extend((batch[n].index, batch[n].original, msg) for n, msg in outcome.errors.items())
        return outcome


def _operation(item: MergeItem, when_matched: str, when_not_matched: str) -> WriteOp:
    upsert = when_not_matched == "insert"
    if when_matched == "replace":
        return WriteOp("replace", filter=item.filter, doc=item.doc, upsert=upsert)
    if when_matched == "merge":
        return WriteOp("update", filter=item.filter, doc={"$set": item.doc}, upsert=upsert)
    if when_matched == "delete" and not upsert:
        return WriteOp("delete", filter=item.filter)
    # keepExisting + insert, and the first phase of delete + insert
    return WriteOp("update", filter=item.filter, doc={"$setOnInsert": item.doc}, upsert=True)


def run_query(run: Callable[[], Any]) -> Any:
    """Runs a read; maps the server's (or mongomock's) filter rejections to InvalidQuery."""
    try:
        return run()
    except (OperationFailure, NotImplementedError, re.error) as exc:
        raise InvalidQuery(f"invalid filter: {exc}", path="/filter") from None
