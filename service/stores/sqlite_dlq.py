"""The DLQ on SQLite: typed, indexed columns for the fixed conditions, JSON text for the document."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from .base import DlqQuery
from .codec import encode_normalized, from_storage_json, to_epoch_ms, utc_ms
from .mql_python import matcher
from .rules import check_purge_query, prepare_dlq_document
from .sqlite_db import SqliteDatabase

_DELETE_CHUNK = 500

#: ``replayedTo`` holds the target (a correlated table-valued function on the row's JSON).
_REPLAYED_TO = "EXISTS (SELECT 1 FROM json_each(doc, '$.replayedTo') AS r WHERE r.value = ?)"


def _contains_ignoring_case(text: str | None, part: str | None) -> int:
    """SQLite's `lower` folds ASCII only; `casefold` folds every script."""
    return int(text is not None and part is not None and part.casefold() in text.casefold())


def _connection(conn: sqlite3.Connection) -> sqlite3.Connection:
    conn.create_function("sluice_icontains", 2, _contains_ignoring_case, deterministic=True)
    return conn


class SqliteDlqStore:
    """:class:`~service.stores.base.DlqStore` for one DLQ collection ``db.coll`` on SQLite.

    ``DlqQuery.filter`` is evaluated in Python (mongomock's matcher) on the rows that the
    indexed conditions select, so a filter costs a scan of those rows.
    """

    def __init__(self, database: SqliteDatabase, *, db: str, coll: str) -> None:
        self._db = database
        self._ns = (db, coll)

    def upsert_many(self, processor: str, docs: Sequence[Mapping[str, Any]]) -> int:
        """Inserts documents whose ``_id`` is new in this collection; returns how many."""
        prepared = [prepare_dlq_document(processor, d, index=i) for i, d in enumerate(docs)]
        rows = [
            (
                *self._ns,
                d["_id"],
                processor,
                d["errInfo"]["reason"],
                d["operatorName"],
                to_epoch_ms(d["dlqTime"]),
                encode_normalized(d),
            )
            for d in prepared
        ]
        with self._db.write() as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT OR IGNORE INTO dlq (ns_db, ns_coll, id, processor, reason, operator, "
                "dlq_time_ms, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            return conn.total_changes - before

    def find(self, query: DlqQuery) -> tuple[list[dict[str, Any]], int]:
        """A page of matching documents (by ``dlqTime`` then ``_id``) and the total count."""
        end = None if query.limit is None else query.skip + query.limit
        with self._db.read() as conn:
            _connection(conn)
            if not query.filter:
                return self._find_indexed(conn, query), self._count_indexed(conn, query)
            page: list[dict[str, Any]] = []
            total = 0
            for doc in self._matching(conn, query, ordered=True):
                if query.skip <= total and (end is None or total < end):
                    page.append(doc)
                total += 1
        return page, total

    def count(self, query: DlqQuery) -> int:
        """How many documents match (skip and limit are ignored)."""
        with self._db.read() as conn:
            _connection(conn)
            if not query.filter:
                return self._count_indexed(conn, query)
            return sum(1 for _ in self._matching(conn, query, ordered=False))

    def purge(self, query: DlqQuery) -> int:
        """Deletes every match and returns the number deleted."""
        check_purge_query(query)
        where, params = self._where(query)
        with self._db.write() as conn:
            _connection(conn)
            if not query.filter:
                return conn.execute(f"DELETE FROM dlq WHERE {where}", params).rowcount
            ids = [d["_id"] for d in self._matching(conn, query, ordered=False)]
            for start in range(0, len(ids), _DELETE_CHUNK):
                conn.executemany(
                    "DELETE FROM dlq WHERE ns_db = ? AND ns_coll = ? AND id = ?",
                    [(*self._ns, i) for i in ids[start : start + _DELETE_CHUNK]],
                )
            return len(ids)

    def _where(self, query: DlqQuery) -> tuple[str, list[Any]]:
        clauses = ["ns_db = ?", "ns_coll = ?", "processor = ?"]
        params: list[Any] = [*self._ns, query.processor]
        for clause, value in (
            ("reason = ?", query.reason),
            ("operator = ?", query.operator_name),
            ("dlq_time_ms >= ?", query.dlq_time_from),
            ("dlq_time_ms < ?", query.dlq_time_to),
        ):
            if value is not None:
                clauses.append(clause)
                params.append(value if isinstance(value, str) else to_epoch_ms(value))
        for clause, text in (
            ("sluice_icontains(reason, ?)", query.reason_contains),
            (_REPLAYED_TO, query.replayed_to),
            ("NOT " + _REPLAYED_TO, query.not_replayed_to),
        ):
            if text is not None:
                clauses.append(clause)
                params.append(text)
        if query.replayed is not None:
            count = "COALESCE(json_array_length(doc, '$.replayedTo'), 0)"
            clauses.append(f"{count} > 0" if query.replayed else f"{count} = 0")
        return " AND ".join(clauses), params

    def mark_replayed(
        self, processor: str, ids: Sequence[str], *, target: str, at: datetime
    ) -> int:
        """Adds ``target`` to ``replayedTo`` and sets ``replayedAt`` (see the protocol)."""
        moment = utc_ms(at)
        marked = 0
        with self._db.write() as conn:
            for start in range(0, len(ids), _DELETE_CHUNK):
                chunk = list(ids[start : start + _DELETE_CHUNK])
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(
                    f"SELECT id, doc FROM dlq WHERE ns_db = ? AND ns_coll = ? AND processor = ? "
                    f"AND id IN ({marks}) AND NOT {_REPLAYED_TO}",
                    [*self._ns, processor, *chunk, target],
                ).fetchall()
                updates = []
                for record_id, text in rows:
                    doc = from_storage_json(text)
                    doc["replayedAt"] = moment
                    doc["replayedTo"] = [*(doc.get("replayedTo") or []), target]
                    updates.append((encode_normalized(doc), *self._ns, record_id))
                conn.executemany(
                    "UPDATE dlq SET doc = ? WHERE ns_db = ? AND ns_coll = ? AND id = ?", updates
                )
                marked += len(updates)
        return marked

    @staticmethod
    def _order(query: DlqQuery) -> str:
        return "dlq_time_ms DESC, id DESC" if query.newest_first else "dlq_time_ms, id"

    def _count_indexed(self, conn: sqlite3.Connection, query: DlqQuery) -> int:
        where, params = self._where(query)
        return int(conn.execute(f"SELECT COUNT(*) FROM dlq WHERE {where}", params).fetchone()[0])

    def _find_indexed(self, conn: sqlite3.Connection, query: DlqQuery) -> list[dict[str, Any]]:
        where, params = self._where(query)
        limit = -1 if query.limit is None else query.limit  # SQLite: negative = no limit
        rows = conn.execute(
            f"SELECT doc FROM dlq WHERE {where} ORDER BY {self._order(query)} LIMIT ? OFFSET ?",
            [*params, limit, query.skip],
        )
        return [from_storage_json(r[0]) for r in rows]

    def _matching(
        self, conn: sqlite3.Connection, query: DlqQuery, *, ordered: bool
    ) -> Iterator[dict[str, Any]]:
        where, params = self._where(query)
        order = f" ORDER BY {self._order(query)}" if ordered else ""
        matches = matcher(query.filter)
        for (text,) in conn.execute(f"SELECT doc FROM dlq WHERE {where}{order}", params):
            doc = from_storage_json(text)
            if matches(doc):
                yield doc
