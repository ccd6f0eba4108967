"""The `LookupStores` opener the runner hands to the compiler for `$lookup`/`$cachedLookup`.

It travels to the executors inside the query's pickled functions, so it holds only strings
(the `local` store's URL and the `Cluster` connections' URIs) and opens the stores in the
executor process on first use, once per process (`_OPEN`): SQLite connections are per thread
in `SqliteDatabase`, pymongo clients are thread-safe and pooled.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline_stages._connectors.ports import KeyedDocuments
from service.stores.sqlite_db import SqliteDatabase
from service.stores.sqlite_documents import SqliteDocumentStore

_SQLITE_PREFIX = "sqlite:///"
_OPEN: dict[str, KeyedDocuments] = {}
_LOCK = threading.Lock()


@dataclass(frozen=True)
class StoreLookupOpener:
    """Opens `local` (by `local_url`) or a `Cluster` connection (by its URI) for lookups."""

    local_url: str
    cluster_uris: Mapping[str, str] = field(default_factory=dict)

    def __call__(self, connection: str) -> KeyedDocuments:
        """The `KeyedDocuments` of `connection` in this process."""
        url = self.cluster_uris.get(connection, self.local_url if connection == "local" else "")
        if not url:
            raise LookupError(f"connection {connection!r} has no collections to look up")
        with _LOCK:
            store = _OPEN.get(url)
            if store is None:
                store = _OPEN[url] = _open(url)
            return store


def _open(url: str) -> KeyedDocuments:
    if url.startswith(_SQLITE_PREFIX):
        return SqliteDocumentStore(SqliteDatabase(url[len(_SQLITE_PREFIX) :]))
    from pymongo import MongoClient

    from service.stores.mongo_documents import MongoDocumentStore

    client: Any = MongoClient(url, tz_aware=True)
    return MongoDocumentStore(client)


def lookup_opener(local_url: str, connections: Mapping[str, Any]) -> StoreLookupOpener:
    """The opener for a run: `local` at `local_url`, and every registered `Cluster`."""
    uris = {
        name: str(c.config["uri"])
        for name, c in connections.items()
        if str(getattr(c.type, "value", c.type)) == "Cluster" and "uri" in c.config
    }
    return StoreLookupOpener(local_url, uris)
