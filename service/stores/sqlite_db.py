"""The SQLite file shared by the embedded stores: connections, transactions and schema.

Safe for several threads and several processes on one host (the Spark driver and the API):

* one connection per thread (and per process: a forked child opens its own, because a
  SQLite connection must not cross ``fork``);
* WAL journal, so readers never block the writer and vice versa;
* ``busy_timeout`` so a writer waits for another process's write instead of failing;
* ``BEGIN IMMEDIATE`` for writes, so a read-then-write transaction takes the write lock up
  front and cannot fail half-way with ``SQLITE_BUSY`` on lock upgrade.

The file is created with mode 0600 before SQLite opens it (SQLite gives its ``-wal`` and
``-shm`` files the database file's mode), and files an earlier version left readable by others
are narrowed to 0600 when the database opens.

Not for network file systems: SQLite's locking is unreliable there.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from service.config.private_files import ensure_private_file, readable_by_others

SCHEMA_VERSION = 1

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS processors (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL UNIQUE,
        pipeline_json TEXT NOT NULL,
        options TEXT NOT NULL,
        state TEXT NOT NULL,
        error TEXT,
        created_ms INTEGER NOT NULL,
        last_state_change_ms INTEGER NOT NULL,
        stats TEXT NOT NULL,
        generation INTEGER NOT NULL,
        version INTEGER NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS processors_created ON processors (created_ms, id)",
    """CREATE TABLE IF NOT EXISTS connections (
        name TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        config TEXT NOT NULL,
        created_ms INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS dlq (
        ns_db TEXT NOT NULL,
        ns_coll TEXT NOT NULL,
        id TEXT NOT NULL,
        processor TEXT NOT NULL,
        reason TEXT NOT NULL,
        operator TEXT NOT NULL,
        dlq_time_ms INTEGER NOT NULL,
        doc TEXT NOT NULL,
        PRIMARY KEY (ns_db, ns_coll, id))""",
    "CREATE INDEX IF NOT EXISTS dlq_time ON dlq (ns_db, ns_coll, processor, dlq_time_ms, id)",
    "CREATE INDEX IF NOT EXISTS dlq_reason ON dlq (ns_db, ns_coll, processor, reason, dlq_time_ms)",
    "CREATE INDEX IF NOT EXISTS dlq_operator ON dlq (ns_db, ns_coll, processor, operator, dlq_time_ms)",
    """CREATE TABLE IF NOT EXISTS documents (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        ns_db TEXT NOT NULL,
        ns_coll TEXT NOT NULL,
        id_key TEXT NOT NULL,
        doc TEXT NOT NULL,
        UNIQUE (ns_db, ns_coll, id_key))""",
    """CREATE TABLE IF NOT EXISTS unique_indexes (
        ns_db TEXT NOT NULL,
        ns_coll TEXT NOT NULL,
        name TEXT NOT NULL,
        fields TEXT NOT NULL,
        PRIMARY KEY (ns_db, ns_coll, name))""",
    """CREATE TABLE IF NOT EXISTS index_entries (
        ns_db TEXT NOT NULL,
        ns_coll TEXT NOT NULL,
        name TEXT NOT NULL,
        key TEXT NOT NULL,
        seq INTEGER NOT NULL,
        PRIMARY KEY (ns_db, ns_coll, name, key))""",
    "CREATE INDEX IF NOT EXISTS index_entries_seq ON index_entries (seq)",
    """CREATE TABLE IF NOT EXISTS processor_stats (
        processor_id TEXT PRIMARY KEY,
        ledger TEXT NOT NULL)""",
)

#: SQLite's companion files of a WAL database (created with the database file's mode).
_COMPANIONS = ("-wal", "-shm", "-journal")


class SqliteDatabase:
    """A SQLite file with per-thread connections and explicit transactions.

    Args:
        path: Database file; its directory is created if needed.
        busy_timeout_ms: How long a writer waits for another writer's lock.
    """

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = 30_000) -> None:
        self.path = Path(path)
        ensure_private_file(self.path)
        self._narrow_companions()
        self._busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._closed = False
        with self.write() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _narrow_companions(self) -> None:
        for suffix in _COMPANIONS:
            companion = self.path.with_name(self.path.name + suffix)
            try:
                if readable_by_others(companion):
                    companion.chmod(0o600)
            except FileNotFoundError:
                continue

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use in the thread and process)."""
        if self._closed:
            raise RuntimeError(f"the store {self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = self._open()
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction, committed on success, rolled back on error."""
        conn = self._begin("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: several queries see one consistent snapshot."""
        conn = self._begin("BEGIN")
        try:
            yield conn
        finally:
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def close(self) -> None:
        """Closes every connection this object opened, in all threads."""
        with self._guard:
            self._closed = True
            for conn in self._opened:
                conn.close()
            self._opened.clear()

    def _begin(self, statement: str) -> sqlite3.Connection:
        conn = self.connection()
        if conn.in_transaction:
            # Nesting would silently merge two units of work; store methods never nest.
            raise RuntimeError("nested SQLite transaction")
        conn.execute(statement)
        return conn

    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_ms / 1000,
            isolation_level=None,  # autocommit: transactions are explicit (BEGIN IMMEDIATE)
            check_same_thread=False,  # only so close() can run from any thread
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_ms)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = FULL")
        with self._guard:
            self._opened.append(conn)
        return conn
