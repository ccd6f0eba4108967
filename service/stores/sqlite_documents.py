"""``$merge`` targets on SQLite: one row per document plus emulated unique indexes.

A document row holds the canonical form of its ``_id`` (unique per collection) and the JSON
text. Unique indexes are rows in ``index_entries`` keyed by the canonical form of the indexed
values (a missing field indexes as null, as in MongoDB; arrays are indexed as one value, not
per element: a documented gap). A ``merge`` on ``_id`` into a collection without other unique
indexes is applied in bulk (`_bulk_merge`: one lookup and one ``executemany`` per kind of
write, in one transaction); otherwise every document runs in its own savepoint, so a failing
document leaves no trace while the rest of the batch is committed. A batch of new documents
whose text is already in the storage form is inserted as that text (`insert_new_texts`: what
the bulk merge would write, without decoding and encoding each document).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .base import MergeResult, WhenMatched, WhenNotMatched
from .codec import (
    canonical_key,
    encode_normalized,
    from_storage_json,
    object_id_key,
    to_storage_json,
)
from .errors import MissingUniqueIndex, StoreError
from .merge_plan import (
    MISSING,
    MergeItem,
    check_modes,
    get_path,
    index_name,
    inserted_document,
    on_fields,
    plan,
    sort_errors,
)
from .mql_python import check_sort, matcher, sort_documents
from .rules import check_namespace, check_paging
from .sqlite_db import SqliteDatabase
from .sqlite_lookup import find_by_keys

_IMMUTABLE = "After applying the update, the (immutable) field '_id' was found to have been altered to _id: {}"


class _DocumentError(Exception):
    """A per-document write error (rolled back to the document's savepoint)."""


class SqliteDocumentStore:
    """:class:`~service.stores.base.DocumentStore` on SQLite (the embedded ``local`` connection)."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    @property
    def database_path(self) -> Path:
        """The SQLite file (executors on this machine open it to write sinks in bulk)."""
        return self._db.path

    def ensure_unique_index(self, db: str, coll: str, fields: Sequence[str]) -> None:
        """Creates a unique index on ``fields``; StoreError ``duplicate_key`` if data violates it."""
        check_namespace(db, coll)
        fields = on_fields(fields)
        if fields == ("_id",):
            return  # the _id index always exists and is unique
        name = index_name(fields)
        with self._db.write() as conn:
            if name in self._indexes(conn, db, coll):
                return
            conn.execute(
                "INSERT INTO unique_indexes (ns_db, ns_coll, name, fields) VALUES (?, ?, ?, ?)",
                (db, coll, name, to_storage_json(list(fields))),
            )
            rows = conn.execute(
                "SELECT seq, doc FROM documents WHERE ns_db = ? AND ns_coll = ?", (db, coll)
            ).fetchall()
            try:
                for seq, text in rows:
                    self._add_entry(conn, (db, coll), name, fields, seq, from_storage_json(text))
            except _DocumentError as exc:
                raise StoreError(str(exc), code="duplicate_key", path="/fields") from None

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
        """Applies documents in order with MongoDB ``$merge`` semantics (see the Protocol)."""
        check_namespace(db, coll)
        check_modes(when_matched, when_not_matched)
        fields = on_fields(on)
        items, errors = plan(docs, fields)
        counts = {"inserted": 0, "updated": 0, "deleted": 0, "none": 0}
        with self._db.write() as conn:
            indexes = self._indexes(conn, db, coll)
            lookup = self._lookup_index(indexes, fields, db, coll)
            if lookup is None and not indexes:
                counts.update(_bulk_merge(conn, (db, coll), items, when_matched, when_not_matched))
                items = []
            for item in items:
                conn.execute("SAVEPOINT doc")
                try:
                    counts[
                        self._apply(
                            conn, (db, coll), indexes, lookup, item, when_matched, when_not_matched
                        )
                    ] += 1
                except _DocumentError as exc:
                    conn.execute("ROLLBACK TO doc")
                    errors.append((item.index, item.original, str(exc)))
                conn.execute("RELEASE doc")
        return MergeResult(
            inserted=counts["inserted"],
            updated=counts["updated"],
            deleted=counts["deleted"],
            errors=sort_errors(errors),
        )

    def insert_new_texts(self, db: str, coll: str, rows: Sequence[tuple[str, str]]) -> bool:
        """Insert documents given as their storage text, with no per-document decode or
        encode, when every one of them is new: all in order and True, or nothing and False.

        Each row is `(id, text)`: the JSON text of the document's `_id` and of the document,
        `_id` first, already in the storage form (see the codec: relaxed Extended JSON whose
        only wrappers are `$date` strings in 1970-9999 to the millisecond, and `$oid`s; the
        sinks' `stored_row` makes them). That is what a `merge` on `_id` of those documents
        inserts when no row has one of the ids, no two rows share one and the collection has
        no other unique index; otherwise nothing is written and False returned, for the
        caller to `merge` them (a replayed batch finds its ids stored).
        """
        check_namespace(db, coll)
        keys = [_id_key(id_text) for id_text, _ in rows]
        if len(set(keys)) != len(keys):
            return False
        with self._db.write() as conn:
            if self._indexes(conn, db, coll):
                return False
            if next(_stored_by_key(conn, (db, coll), keys, "1"), None) is not None:
                return False
            conn.executemany(
                "INSERT INTO documents (ns_db, ns_coll, id_key, doc) VALUES (?, ?, ?, ?)",
                [(db, coll, key, text) for key, (_, text) in zip(keys, rows, strict=True)],
            )
        return True

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
        check_namespace(db, coll)
        check_paging(offset=skip, limit=limit)
        order = check_sort(sort)
        matches = matcher(filter)
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT doc FROM documents WHERE ns_db = ? AND ns_coll = ? ORDER BY seq", (db, coll)
            )
            docs = [d for d in (from_storage_json(r[0]) for r in rows) if matches(d)]
        docs = sort_documents(docs, order)
        return docs[skip:] if limit is None else docs[skip : skip + limit]

    def find_by_keys(
        self, db: str, coll: str, field: str, keys: Sequence[Any]
    ) -> list[dict[str, Any]]:
        """Documents whose ``field`` equals one of ``keys`` (the `$lookup` port)."""
        return find_by_keys(self._db, db, coll, field, keys)

    def count(self, db: str, coll: str, filter: Mapping[str, Any] | None = None) -> int:
        """How many documents match."""
        check_namespace(db, coll)
        matches = matcher(filter)
        with self._db.read() as conn:
            if not filter:
                sql = "SELECT COUNT(*) FROM documents WHERE ns_db = ? AND ns_coll = ?"
                return int(conn.execute(sql, (db, coll)).fetchone()[0])
            rows = conn.execute(
                "SELECT doc FROM documents WHERE ns_db = ? AND ns_coll = ?", (db, coll)
            )
            return sum(1 for (text,) in rows if matches(from_storage_json(text)))

    def drop(self, db: str, coll: str) -> None:
        """Deletes the collection's documents and indexes."""
        check_namespace(db, coll)
        with self._db.write() as conn:
            for table in ("documents", "index_entries", "unique_indexes"):
                conn.execute(f"DELETE FROM {table} WHERE ns_db = ? AND ns_coll = ?", (db, coll))

    @staticmethod
    def _indexes(conn: sqlite3.Connection, db: str, coll: str) -> dict[str, tuple[str, ...]]:
        rows = conn.execute(
            "SELECT name, fields FROM unique_indexes WHERE ns_db = ? AND ns_coll = ?", (db, coll)
        )
        return {name: tuple(from_storage_json(fields)) for name, fields in rows}

    @staticmethod
    def _lookup_index(
        indexes: dict[str, tuple[str, ...]], fields: tuple[str, ...], db: str, coll: str
    ) -> tuple[str, tuple[str, ...]] | None:
        if fields == ("_id",):
            return None
        for name, indexed in indexes.items():
            if set(indexed) == set(fields):
                return name, indexed
        msg = (
            f"$merge on {list(fields)} needs a unique index on exactly those fields in {db}.{coll}"
        )
        raise MissingUniqueIndex(msg, path="/on")

    def _apply(
        self,
        conn: sqlite3.Connection,
        ns: tuple[str, str],
        indexes: dict[str, tuple[str, ...]],
        lookup: tuple[str, tuple[str, ...]] | None,
        item: MergeItem,
        when_matched: str,
        when_not_matched: str,
    ) -> str:
        target = self._find_target(conn, ns, lookup, item)
        if target is None:
            if when_not_matched == "discard":
                return "none"
            new = inserted_document(item, replace=when_matched == "replace")
            self._insert(conn, ns, indexes, new)
            return "inserted"
        seq, existing = target
        if when_matched == "keepExisting":
            return "none"
        if when_matched == "delete":
            conn.execute("DELETE FROM documents WHERE seq = ?", (seq,))
            conn.execute("DELETE FROM index_entries WHERE seq = ?", (seq,))
            return "deleted"
        if "_id" in item.doc and canonical_key(item.doc["_id"]) != canonical_key(existing["_id"]):
            raise _DocumentError(_IMMUTABLE.format(item.doc["_id"]))
        rest = {k: v for k, v in item.doc.items() if k != "_id"}
        new = (
            {"_id": existing["_id"], **rest} if when_matched == "replace" else {**existing, **rest}
        )
        conn.execute("UPDATE documents SET doc = ? WHERE seq = ?", (encode_normalized(new), seq))
        conn.execute("DELETE FROM index_entries WHERE seq = ?", (seq,))
        self._add_entries(conn, ns, indexes, seq, new)
        return "updated"

    @staticmethod
    def _find_target(
        conn: sqlite3.Connection,
        ns: tuple[str, str],
        lookup: tuple[str, tuple[str, ...]] | None,
        item: MergeItem,
    ) -> tuple[int, dict[str, Any]] | None:
        if lookup is None:
            row = conn.execute(
                "SELECT seq, doc FROM documents WHERE ns_db = ? AND ns_coll = ? AND id_key = ?",
                (*ns, canonical_key(item.doc["_id"])),
            ).fetchone()
        else:
            name, indexed = lookup
            row = conn.execute(
                "SELECT d.seq, d.doc FROM index_entries e JOIN documents d ON d.seq = e.seq "
                "WHERE e.ns_db = ? AND e.ns_coll = ? AND e.name = ? AND e.key = ?",
                (*ns, name, _index_key(item.doc, indexed)),
            ).fetchone()
        return None if row is None else (row[0], from_storage_json(row[1]))

    def _insert(
        self,
        conn: sqlite3.Connection,
        ns: tuple[str, str],
        indexes: dict[str, tuple[str, ...]],
        doc: dict[str, Any],
    ) -> None:
        try:
            cursor = conn.execute(
                "INSERT INTO documents (ns_db, ns_coll, id_key, doc) VALUES (?, ?, ?, ?)",
                (*ns, canonical_key(doc["_id"]), encode_normalized(doc)),
            )
        except sqlite3.IntegrityError:
            raise _DocumentError(_duplicate(ns, "_id_", {"_id": doc["_id"]})) from None
        seq = cursor.lastrowid
        if seq is None:  # an INSERT always sets it; this only narrows the type
            raise RuntimeError("SQLite returned no row id for an INSERT")
        self._add_entries(conn, ns, indexes, seq, doc)

    def _add_entries(
        self,
        conn: sqlite3.Connection,
        ns: tuple[str, str],
        indexes: dict[str, tuple[str, ...]],
        seq: int,
        doc: dict[str, Any],
    ) -> None:
        for name, fields in indexes.items():
            self._add_entry(conn, ns, name, fields, seq, doc)

    @staticmethod
    def _add_entry(
        conn: sqlite3.Connection,
        ns: tuple[str, str],
        name: str,
        fields: tuple[str, ...],
        seq: int,
        doc: dict[str, Any],
    ) -> None:
        try:
            conn.execute(
                "INSERT INTO index_entries (ns_db, ns_coll, name, key, seq) VALUES (?, ?, ?, ?, ?)",
                (*ns, name, _index_key(doc, fields), seq),
            )
        except sqlite3.IntegrityError:
            values = {f: _indexed_value(doc, f) for f in fields}
            raise _DocumentError(_duplicate(ns, name, values)) from None


#: SQLite's default limit on a statement's parameters is 32766; stay well below it.
_IN_CHUNK = 500
_INTEGER = re.compile(r"-?[0-9]+")
#: A stored document `_bulk_merge` did not decode (`delete` and `keepExisting` need not).
_NOT_READ: dict[str, Any] = {"_id": None}


def _stored_by_key(
    conn: sqlite3.Connection, ns: tuple[str, str], keys: Sequence[str], columns: str
) -> Iterator[tuple[Any, ...]]:
    """`columns` of the documents of `ns` whose `id_key` is one of `keys`, queried `_IN_CHUNK`
    keys at a time (lazily: a caller that stops early queries no further)."""
    for start in range(0, len(keys), _IN_CHUNK):
        chunk = keys[start : start + _IN_CHUNK]
        marks = ",".join("?" * len(chunk))
        sql = (
            f"SELECT {columns} FROM documents WHERE ns_db = ? AND ns_coll = ? "
            f"AND id_key IN ({marks})"
        )
        yield from conn.execute(sql, (*ns, *chunk))


def _id_key(id_text: str) -> str:
    """The `id_key` of an `_id` given as storage JSON (`canonical_key` of its value); an
    ObjectId's without decoding it."""
    if id_text.startswith('{"$oid":"') and id_text.endswith('"}') and len(id_text) == 35:
        return object_id_key(id_text[9:33])
    if id_text.startswith('"') and "\\" not in id_text:
        return id_text  # a string without escapes: `canonical_key` writes it back as it is
    if _INTEGER.fullmatch(id_text):
        return str(int(id_text))
    return canonical_key(from_storage_json(id_text))


def _bulk_merge(
    conn: sqlite3.Connection,
    ns: tuple[str, str],
    items: Sequence[MergeItem],
    when_matched: str,
    when_not_matched: str,
) -> dict[str, int]:
    """Apply `_id`-matched items to a collection without other unique indexes in bulk: one
    lookup of the stored documents per 500 keys, the items applied in order in memory (a later
    item of the same `_id` sees an earlier one's effect), then one `executemany` per kind of
    write. No per-document error is possible here (`plan` refused what could not be written:
    the matched `_id` is the item's own), so the result equals applying the items one by one.
    """
    keys = [canonical_key(item.doc["_id"]) for item in items]
    stored: dict[str, tuple[int, str]] = {}
    distinct = list(dict.fromkeys(keys))
    for id_key, seq, text in _stored_by_key(conn, ns, distinct, "id_key, seq, doc"):
        stored[id_key] = (seq, text)
    #: key -> (stored seq or None, current document or None when absent).
    state: dict[str, tuple[int | None, dict[str, Any] | None]] = {}
    #: Keys whose document this call changes (only those are written back).
    changed: set[str] = set()
    # `delete` and `keepExisting` only ask whether a document is stored, not what it holds.
    decode = when_matched in ("merge", "replace")
    counts = {"inserted": 0, "updated": 0, "deleted": 0, "none": 0}
    for item, key in zip(items, keys, strict=True):
        if key not in state:
            found = stored.get(key)
            if found is None:
                state[key] = (None, None)
            else:
                state[key] = (found[0], from_storage_json(found[1]) if decode else _NOT_READ)
        seq, existing = state[key]
        if existing is None:
            if when_not_matched == "discard":
                counts["none"] += 1
                continue
            state[key] = (seq, inserted_document(item, replace=when_matched == "replace"))
            changed.add(key)
            counts["inserted"] += 1
        elif when_matched == "keepExisting":
            counts["none"] += 1
        elif when_matched == "delete":
            state[key] = (seq, None)
            changed.add(key)
            counts["deleted"] += 1
        else:
            rest = {k: v for k, v in item.doc.items() if k != "_id"}
            head = {"_id": existing["_id"]}
            state[key] = (
                seq,
                {**head, **rest} if when_matched == "replace" else {**existing, **rest},
            )
            changed.add(key)
            counts["updated"] += 1
    written = [(seq, doc) for key, (seq, doc) in state.items() if key in changed]
    conn.executemany(
        "UPDATE documents SET doc = ? WHERE seq = ?",
        [(encode_normalized(doc), seq) for seq, doc in written if seq is not None and doc],
    )
    conn.executemany(
        "DELETE FROM documents WHERE seq = ?",
        [(seq,) for seq, doc in written if seq is not None and doc is None],
    )
    conn.executemany(
        "INSERT INTO documents (ns_db, ns_coll, id_key, doc) VALUES (?, ?, ?, ?)",
        [
            (*ns, key, encode_normalized(doc))
            for key, (seq, doc) in state.items()
            if seq is None and doc is not None
        ],
    )
    return counts


def _indexed_value(doc: Mapping[str, Any], field: str) -> Any:
    value = get_path(doc, field)
    return None if value is MISSING else value


def _index_key(doc: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    return canonical_key([_indexed_value(doc, f) for f in fields])


def _duplicate(ns: tuple[str, str], index: str, values: dict[str, Any]) -> str:
    return (
        f"E11000 duplicate key error collection: {ns[0]}.{ns[1]} index: {index} dup key: {values!r}"
    )
