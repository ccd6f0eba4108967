"""Choosing the stores from a URL.

* ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's spelling:
  everything after ``sqlite:///`` is the path). The default is ``<data_dir>/sluice.db``.
* ``mongodb://...`` or ``mongodb+srv://...``: the URI's default database holds the metadata
  (``sluice`` when the URI names none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from pymongo import MongoClient

from service.config.settings import default_data_dir

from .base import ConnectionStore, DlqStore, DocumentStore, ProcessorStore, StatsStore
from .mongo import MongoDlqStore, MongoStores
from .mongo_documents import MongoDocumentStore
from .rules import check_namespace
from .secrets import SecretBox
from .sqlite import SqliteStores

_SQLITE_PREFIX = "sqlite:///"
_MONGO_PREFIXES = ("mongodb://", "mongodb+srv://")


class Stores(Protocol):
    """What :func:`open_stores` returns, whichever backend is chosen."""

    @property
    def processors(self) -> ProcessorStore:
        """The processor store."""
        ...

    @property
    def connections(self) -> ConnectionStore:
        """The connection registry."""
        ...

    @property
    def documents(self) -> DocumentStore:
        """Collections of the embedded ``local`` connection (``$merge`` targets)."""
        ...

    @property
    def stats(self) -> StatsStore:
        """Per-processor counts, recorded per micro-batch."""
        ...

    def dlq(self, db: str, coll: str) -> DlqStore:
        """The DLQ collection ``db.coll`` on this backend."""
        ...

    def close(self) -> None:
        """Releases connections."""
        ...


def default_store_url(data_dir: str | Path) -> str:
    """``sqlite:///<data_dir>/sluice.db`` (absolute data dirs give four slashes)."""
    return f"{_SQLITE_PREFIX}{Path(data_dir) / 'sluice.db'}"


def open_stores(
    url: str | None = None, *, data_dir: str | Path | None = None, secrets: SecretBox | None = None
) -> Stores:
    """Opens the stores named by ``url`` (default: SQLite under ``data_dir``, else ``.``).

    Connection secrets are sealed with ``secrets``; by default with the key of ``data_dir``
    (``SLUICE_SECRET_KEY``, else ``<data_dir>/secret.key``: :meth:`SecretBox.load`), or without
    a data directory, beside the SQLite file or in the default data directory (MongoDB).

    Raises:
        ValueError: On a URL that is neither ``sqlite:///`` nor ``mongodb[+srv]://``.
        SecretKeyError: (a ``ValueError``) On a key that does not open the stored secrets.
    """
    url = url or default_store_url(data_dir or ".")
    key_dir = Path(data_dir).absolute() if data_dir is not None else None
    if url.startswith(_SQLITE_PREFIX):
        path = url[len(_SQLITE_PREFIX) :]
        if not path:
            raise ValueError("sqlite:/// URLs need a file path, e.g. sqlite:///data/sluice.db")
        box = secrets or SecretBox.load(data_dir=key_dir or Path(path).absolute().parent)
        return SqliteStores(path, secrets=box)
    if url.startswith(_MONGO_PREFIXES):
        box = secrets or SecretBox.load(data_dir=key_dir or default_data_dir())
        return MongoStores.from_uri(url, secrets=box)
    scheme = url.split(":", 1)[0]
    raise ValueError(f"unsupported store URL scheme {scheme!r}; use sqlite:/// or mongodb://")


class ClusterTarget:
    """``$merge`` and DLQ access to a MongoDB ``Cluster`` connection (not Sluice's metadata).

    Args:
        uri: The connection's MongoDB URI.
    """

    def __init__(self, uri: str) -> None:
        self._client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
        self.documents = MongoDocumentStore(self._client)
        self._dlqs: dict[tuple[str, str], MongoDlqStore] = {}

    def dlq(self, db: str, coll: str) -> DlqStore:
        """The DLQ collection ``db.coll`` on the cluster (indexes created on first use)."""
        check_namespace(db, coll)
        if (db, coll) not in self._dlqs:
            self._dlqs[(db, coll)] = MongoDlqStore(self._client[db][coll])
        return self._dlqs[(db, coll)]

    def close(self) -> None:
        """Closes the client."""
        self._client.close()
