"""`find_by_keys` on SQLite: the `$lookup` port (`_connectors.ports.KeyedDocuments`).

A lookup by `_id` reads the document rows through the `(ns, id_key)` unique index, and a
lookup by a field with a single-field unique index through `index_entries`; both compare the
canonical keys, so numbers match by value. Any other field is read by one scan of the
collection filtered in SQL where the keys allow it (top-level field, string or number keys:
`json_extract ... IN`, arrays kept for the caller to match by element) and by the MQL
matcher otherwise. The caller re-matches the rows, so a superset is fine.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .codec import canonical_key, from_storage_json
from .mql_python import matcher
from .rules import check_namespace
from .sqlite_db import SqliteDatabase

#: SQLite's default limit of host parameters is 32766; stay well below it per statement.
_CHUNK = 900


def find_by_keys(
    database: SqliteDatabase, db: str, coll: str, field: str, keys: Sequence[Any]
) -> list[dict[str, Any]]:
    """Documents of `db.coll` whose `field` equals one of `keys`, in insertion order."""
    check_namespace(db, coll)
    if not keys:
        return []
    with database.read() as conn:
        if field == "_id":
            wanted = [canonical_key(k) for k in keys if not isinstance(k, list)]
            rows = _chunked(conn, "id_key", wanted, db, coll)
        elif (index := _single_field_index(conn, db, coll, field)) is not None:
            wanted = [canonical_key([k]) for k in keys]
            rows = _indexed(conn, index, wanted, db, coll)
        else:
            return _scan(conn, db, coll, field, keys)
    return [from_storage_json(text) for _, text in sorted(rows)]


def _chunked(conn: Any, column: str, wanted: list[str], db: str, coll: str) -> list[Any]:
    rows: list[Any] = []
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows += conn.execute(
            f"SELECT seq, doc FROM documents WHERE ns_db = ? AND ns_coll = ? "  # noqa: S608
            f"AND {column} IN ({marks})",
            (db, coll, *chunk),
        ).fetchall()
    return rows


def _single_field_index(conn: Any, db: str, coll: str, field: str) -> str | None:
    rows = conn.execute(
        "SELECT name, fields FROM unique_indexes WHERE ns_db = ? AND ns_coll = ?", (db, coll)
    )
    for name, fields in rows:
        if json.loads(fields) == [field]:
            return str(name)
    return None


def _indexed(conn: Any, index: str, wanted: list[str], db: str, coll: str) -> list[Any]:
    rows: list[Any] = []
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows += conn.execute(
            "SELECT d.seq, d.doc FROM index_entries e JOIN documents d ON d.seq = e.seq "
            f"WHERE e.ns_db = ? AND e.ns_coll = ? AND e.name = ? AND e.key IN ({marks})",  # noqa: S608
            (db, coll, index, *chunk),
        ).fetchall()
    return rows


def _sql_keys(field: str, keys: Sequence[Any]) -> list[Any] | None:
    simple = all(isinstance(k, str | int | float) and not isinstance(k, bool) for k in keys)
    if "." in field or '"' in field or not simple or len(keys) > _CHUNK:
        return None
    return list(keys)


def _scan(conn: Any, db: str, coll: str, field: str, keys: Sequence[Any]) -> list[dict[str, Any]]:
    sql_keys = _sql_keys(field, keys)
    if sql_keys is not None:
        path = f'$."{field}"'
        marks = ",".join("?" * len(sql_keys))
        rows = conn.execute(
            "SELECT doc FROM documents WHERE ns_db = ? AND ns_coll = ? AND "
            f"(json_extract(doc, ?) IN ({marks}) OR json_type(doc, ?) = 'array') ORDER BY seq",  # noqa: S608
            (db, coll, path, *sql_keys, path),
        )
        return [from_storage_json(text) for (text,) in rows]
    matches = matcher({field: {"$in": list(keys)}})
    rows = conn.execute(
        "SELECT doc FROM documents WHERE ns_db = ? AND ns_coll = ? ORDER BY seq", (db, coll)
    )
    return [d for d in (from_storage_json(text) for (text,) in rows) if matches(d)]
