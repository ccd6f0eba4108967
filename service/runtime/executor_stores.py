"""The stores a sink reaches from a Spark executor's Python worker, opened once per process.

A `$merge` or collection `$emit` writes each partition in the task that holds it
(`pipeline_stages._connectors.sinks.partitioned`). Spark pickles the sink with the task; the
sink's resources (`ExecutorSinkResources`) carry only names, paths and URIs, and open the
stores here, in the worker, keeping them for the worker's next tasks (Python workers are
reused). `local` is the service's SQLite file, which executors on the service's machine open
directly (WAL and a busy timeout let several processes write it: `sqlite_db`); executors on
other machines cannot, and the runner writes such a sink from the driver instead.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pymongo import MongoClient

from pipeline_stages._stream.context import BUILTIN_CONNECTIONS, ConnectionInfo
from service.stores.mongo_documents import MongoDocumentStore
from service.stores.sqlite_db import SqliteDatabase
from service.stores.sqlite_documents import SqliteDocumentStore

_opened: dict[tuple[int, str, str], Any] = {}
_lock = threading.Lock()


def _cached(kind: str, key: str, open_: Any) -> Any:
    """One object per process (a forked worker opens its own) and key."""
    with _lock:
        slot = (os.getpid(), kind, key)
        if slot not in _opened:
            _opened[slot] = open_()
        return _opened[slot]


def local_documents(path: str) -> Any:
    """The `DocumentStore` of the SQLite file at `path`."""
    return _cached("sqlite", path, lambda: SqliteDocumentStore(SqliteDatabase(path)))


def cluster_client(uri: str) -> Any:
    """The pymongo client of a `Cluster` URI (tz-aware, as the stores require)."""
    return _cached("client", uri, lambda: MongoClient(uri, tz_aware=True))


def cluster_documents(uri: str) -> Any:
    """The `DocumentStore` over the client of `uri`."""
    return _cached("documents", uri, lambda: MongoDocumentStore(cluster_client(uri)))


@dataclass(frozen=True)
class ExecutorSinkResources:
    """Picklable `SinkResources` (`sinks.dispatch`) for the executors.

    Attributes:
        connections: The sink's connection (secrets included), by name.
        local_path: The SQLite file of `local`, when executors can open it.
    """

    connections: Mapping[str, ConnectionInfo] = field(default_factory=dict)
    local_path: str | None = None

    def connection(self, name: str) -> ConnectionInfo | None:
        """A connection the sink names, built-ins too."""
        return self.connections.get(name) or BUILTIN_CONNECTIONS.get(name)

    def documents(self, connection: str) -> Any:
        """The document store of `local` or of a `Cluster` connection."""
        info = self.connection(connection)
        if info is not None and info.type == "Local":
            if self.local_path is None:
                raise LookupError("executors cannot open 'local' here")
            return local_documents(self.local_path)
        return cluster_documents(self._uri(connection, info))

    def mongo_client(self, connection: str) -> Any:
        """The pymongo client of a `Cluster` connection."""
        return cluster_client(self._uri(connection, self.connection(connection)))

    @staticmethod
    def _uri(name: str, info: ConnectionInfo | None) -> str:
        uri = info.config.get("uri") if info is not None and info.type == "Cluster" else None
        if not isinstance(uri, str):
            raise LookupError(f"connection {name!r} is not a Cluster connection with a uri")
        return uri
