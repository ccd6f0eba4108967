"""Embedded SQLite stores (the zero-configuration default): processors, connections, DLQ, documents.

One file (default ``<data_dir>/sluice.db``) holds everything; see :mod:`.sqlite_db` for the
thread/process safety rules. Records are typed columns plus relaxed-EJSON text
(:mod:`.codec`); times are INTEGER milliseconds since the epoch.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .base import ConnectionRecord, ProcessorRecord
from .codec import from_epoch_ms, from_storage_json, to_epoch_ms, to_storage_json
from .errors import AlreadyExists, Conflict, NotFound
from .rules import check_namespace, check_paging
from .secrets import SecretBox
from .sqlite_db import SqliteDatabase
from .sqlite_dlq import SqliteDlqStore
from .sqlite_documents import SqliteDocumentStore
from .sqlite_stats import SqliteStatsStore

_PROCESSOR_COLUMNS = (
    "id, name, pipeline_json, options, state, error, created_ms, last_state_change_ms, stats, "
    "generation, version"
)


class SqliteProcessorStore:
    """:class:`~service.stores.base.ProcessorStore` on SQLite."""

    def __init__(self, database: SqliteDatabase) -> None:
        self._db = database

    def create(self, record: ProcessorRecord) -> ProcessorRecord:
        """Stores a new record with version 1. Raises AlreadyExists on a taken name or id."""
        stored = record.evolve(version=1)
        try:
            with self._db.write() as conn:
                conn.execute(
                    f"INSERT INTO processors ({_PROCESSOR_COLUMNS}) VALUES "
                    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    _processor_row(stored),
                )
        except sqlite3.IntegrityError:
            msg = f"a processor named {record.name!r} (or with id {record.id}) already exists"
            raise AlreadyExists(msg, path="/name") from None
        return stored

    def get(self, name: str) -> ProcessorRecord | None:
        """The processor called ``name``, or None."""
        return self._get_one("name", name)

    def get_by_id(self, processor_id: str) -> ProcessorRecord | None:
        """The processor with id ``processor_id``, or None."""
        return self._get_one("id", processor_id)

    def update(self, record: ProcessorRecord) -> ProcessorRecord:
        """Compare-and-set on ``record.version``; returns the stored record (version + 1)."""
        stored = record.evolve(version=record.version + 1)
        row = _processor_row(stored)
        try:
            with self._db.write() as conn:
                current = conn.execute(
                    "SELECT version FROM processors WHERE id = ?", (record.id,)
                ).fetchone()
                if current is None:
                    raise NotFound(f"processor {record.id} does not exist", path="/id")
                if current[0] != record.version:
                    msg = f"processor {record.name!r} changed (version {current[0]}, not {record.version})"
                    raise Conflict(msg, path="/version")
                conn.execute(
                    "UPDATE processors SET name = ?, pipeline_json = ?, options = ?, state = ?, "
                    "error = ?, created_ms = ?, last_state_change_ms = ?, stats = ?, "
                    "generation = ?, version = ? WHERE id = ?",
                    (*row[1:], record.id),
                )
        except sqlite3.IntegrityError:
            msg = f"a processor named {record.name!r} already exists"
            raise AlreadyExists(msg, path="/name") from None
        return stored

    def delete(self, name: str) -> bool:
        """Deletes the processor; False if there was none."""
        with self._db.write() as conn:
            return conn.execute("DELETE FROM processors WHERE name = ?", (name,)).rowcount > 0

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[list[ProcessorRecord], int]:
        """A page ordered by ``(created_at, id)`` and the total count."""
        check_paging(offset=offset, limit=limit)
        with self._db.read() as conn:
            total = conn.execute("SELECT COUNT(*) FROM processors").fetchone()[0]
            rows = conn.execute(
                f"SELECT {_PROCESSOR_COLUMNS} FROM processors ORDER BY created_ms, id "
                "LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
        return [_processor_from_row(r) for r in rows], total

    def _get_one(self, column: str, value: str) -> ProcessorRecord | None:
        row = (
            self._db.connection()
            .execute(f"SELECT {_PROCESSOR_COLUMNS} FROM processors WHERE {column} = ?", (value,))
            .fetchone()
        )
        return None if row is None else _processor_from_row(row)


class SqliteConnectionStore:
    """:class:`~service.stores.base.ConnectionStore` on SQLite; secrets sealed at rest.

    ``config`` is written with every secret sealed by ``secrets`` (:mod:`.secrets`) and read
    back opened. Opening the store seals rows an earlier version wrote in plain text (or with
    an older key), and checks that every row opens with the key, in one transaction.
    """

    def __init__(self, database: SqliteDatabase, secrets: SecretBox) -> None:
        self._db = database
        self._secrets = secrets
        self._seal_stored_rows()

    def _seal_stored_rows(self) -> None:
        with self._db.write() as conn:
            rows = conn.execute("SELECT name, config FROM connections").fetchall()
            for name, text in rows:
                config = from_storage_json(text)
                self._secrets.open_config(config, name=name)  # refuses a wrong key now
                if self._secrets.needs_sealing(config):
                    sealed = to_storage_json(self._secrets.seal_config(config))
                    conn.execute("UPDATE connections SET config = ? WHERE name = ?", (sealed, name))

    def create(self, record: ConnectionRecord) -> ConnectionRecord:
        """Stores a new connection. Raises AlreadyExists on a taken name."""
        record = record.evolve()  # re-validate: model_copy(update=...) skips validation
        try:
            with self._db.write() as conn:
                conn.execute(
                    "INSERT INTO connections (name, type, config, created_ms) VALUES (?, ?, ?, ?)",
                    (
                        record.name,
                        record.type.value,
                        to_storage_json(self._secrets.seal_config(record.config)),
                        to_epoch_ms(record.created_at),
                    ),
                )
        except sqlite3.IntegrityError:
            msg = f"a connection named {record.name!r} already exists"
            raise AlreadyExists(msg, path="/name") from None
        return record

    def get(self, name: str) -> ConnectionRecord | None:
        """The connection called ``name`` (secrets included), or None."""
        row = (
            self._db.connection()
            .execute(
                "SELECT name, type, config, created_ms FROM connections WHERE name = ?", (name,)
            )
            .fetchone()
        )
        return None if row is None else self._from_row(row)

    def delete(self, name: str) -> bool:
        """Deletes the connection; False if there was none."""
        with self._db.write() as conn:
            return conn.execute("DELETE FROM connections WHERE name = ?", (name,)).rowcount > 0

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[list[ConnectionRecord], int]:
        """A page ordered by name and the total count."""
        check_paging(offset=offset, limit=limit)
        with self._db.read() as conn:
            total = conn.execute("SELECT COUNT(*) FROM connections").fetchone()[0]
            rows = conn.execute(
                "SELECT name, type, config, created_ms FROM connections ORDER BY name "
                "LIMIT ? OFFSET ?",
                (limit, offset),
            ).fetchall()
        return [self._from_row(r) for r in rows], total

    def _from_row(self, row: tuple[Any, ...]) -> ConnectionRecord:
        config = self._secrets.open_config(from_storage_json(row[2]), name=row[0])
        return ConnectionRecord(
            name=row[0], type=row[1], config=config, created_at=from_epoch_ms(row[3])
        )


class SqliteStores:
    """Every store on one SQLite file.

    Args:
        path: The database file (created with mode 0600).
        secrets: Seals connection secrets; default: the key of the file's directory
            (``SLUICE_SECRET_KEY``, else ``secret.key`` beside the file: :meth:`SecretBox.load`).
        busy_timeout_ms: How long a writer waits for another writer's lock.

    Attributes:
        processors: The processor store.
        connections: The connection registry.
        documents: Collections of the embedded ``local`` connection (``$merge`` targets).
        stats: Per-processor counts, persisted per micro-batch.
    """

    def __init__(
        self, path: str | Path, *, secrets: SecretBox | None = None, busy_timeout_ms: int = 30_000
    ) -> None:
        self.database = SqliteDatabase(path, busy_timeout_ms=busy_timeout_ms)
        if secrets is None:
            secrets = SecretBox.load(data_dir=Path(path).absolute().parent)
        self.processors = SqliteProcessorStore(self.database)
        self.connections = SqliteConnectionStore(self.database, secrets)
        self.documents = SqliteDocumentStore(self.database)
        self.stats = SqliteStatsStore(self.database)

    def dlq(self, db: str, coll: str) -> SqliteDlqStore:
        """The DLQ collection ``db.coll`` (SQLite keeps it apart from ``documents``)."""
        check_namespace(db, coll)
        return SqliteDlqStore(self.database, db=db, coll=coll)

    def close(self) -> None:
        """Closes the file's connections in every thread."""
        self.database.close()


def _processor_row(record: ProcessorRecord) -> tuple[Any, ...]:
    return (
        record.id,
        record.name,
        record.pipeline_json,
        to_storage_json(record.options),
        record.state.value,
        None if record.error is None else to_storage_json(record.error.model_dump()),
        to_epoch_ms(record.created_at),
        to_epoch_ms(record.last_state_change),
        to_storage_json(record.stats),
        record.generation,
        record.version,
    )


def _processor_from_row(row: tuple[Any, ...]) -> ProcessorRecord:
    return ProcessorRecord(
        id=row[0],
        name=row[1],
        pipeline_json=row[2],
        options=from_storage_json(row[3]),
        state=row[4],
        error=None if row[5] is None else from_storage_json(row[5]),
        created_at=from_epoch_ms(row[6]),
        last_state_change=from_epoch_ms(row[7]),
        stats=from_storage_json(row[8]),
        generation=row[9],
        version=row[10],
    )
