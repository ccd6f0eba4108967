"""Store factories for the contract suite: every test runs once per lane.

Lanes:
* ``sqlite``: the embedded default, end to end (fresh file per test).
* ``mongo-mongomock-query-construction-only``: ``MongoStores`` on mongomock. This checks the
  queries, sorts and write operations ``MongoStores`` builds against mongomock's in-memory
  model. It does NOT test a MongoDB server (no wire protocol, server errors or PCRE), and
  bulk writes go through the mongomock emulation of ``bulk_write``.
* ``mongo-real``: ``MongoStores`` on the server at ``MONGODB_URI``; skipped (visibly) when the
  variable is unset, which is always the case on these machines.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mongomock
import pytest
from cryptography.fernet import Fernet

from service.stores.factory import Stores
from service.stores.mongo import MongoStores
from service.stores.mongo_bulk import emulate_bulk_write_unordered
from service.stores.secrets import SecretBox
from service.stores.sqlite import SqliteStores

MONGODB_URI = os.environ.get("MONGODB_URI")
REAL_SKIP_REASON = (
    "MONGODB_URI not set: no real MongoDB server here, the mongo-real lane did not run"
)

LANES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("mongomock", id="mongo-mongomock-query-construction-only"),
    pytest.param(
        "real",
        id="mongo-real",
        marks=pytest.mark.skipif(MONGODB_URI is None, reason=REAL_SKIP_REASON),
    ),
]


@dataclass
class Harness:
    """One lane's stores plus a way to simulate a restart.

    Attributes:
        lane: ``sqlite``, ``mongomock`` or ``real``.
        stores: The open stores.
        db: A database name for DLQ and ``$merge`` collections, unique per test on real servers.
        reopen: Closes the stores and opens them again on the same storage.
        secrets: The key sealing connection secrets (the same one on every reopen).
        raw_connections: The stored text of every connection config, as it is at rest.
    """

    lane: str
    stores: Stores
    db: str
    _reopen: Callable[[], Stores]
    secrets: SecretBox
    raw_connections: Callable[[], list[str]]
    _cleanup: list[Callable[[], None]] = field(default_factory=list)

    def reopen(self) -> Stores:
        """Closes and reopens the stores (a process restart, as far as the store can tell)."""
        self.stores.close()
        self.stores = self._reopen()
        return self.stores


def make_box() -> SecretBox:
    """A key of the test's own (never a file in the home directory)."""
    return SecretBox([Fernet.generate_key()], source="the test's key")


def _sqlite(tmp_path: Path) -> Harness:
    import sqlite3

    path = tmp_path / "sluice.db"
    box = make_box()

    def raw() -> list[str]:
        with sqlite3.connect(path) as conn:
            return [row[0] for row in conn.execute("SELECT config FROM connections")]

    def make() -> Stores:
        return SqliteStores(path, secrets=box)

    return Harness("sqlite", make(), "userdb", make, box, raw)


def _mongomock() -> Harness:
    client: Any = mongomock.MongoClient(tz_aware=True)
    box = make_box()

    def make() -> Stores:
        return MongoStores(client["sluice"], secrets=box, bulk_writer=emulate_bulk_write_unordered)

    def raw() -> list[str]:
        return [d["config_json"] for d in client["sluice"]["connections"].find()]

    return Harness("mongomock", make(), "userdb", make, box, raw)


def _real() -> Harness:
    from pymongo import MongoClient

    suffix = uuid.uuid4().hex[:12]
    client: MongoClient[dict[str, Any]] = MongoClient(MONGODB_URI, tz_aware=True)
    meta, user = f"sluice_contract_{suffix}", f"sluice_contract_user_{suffix}"
    box = make_box()

    def make() -> Stores:
        return MongoStores(client[meta], secrets=box)

    def raw() -> list[str]:
        return [d["config_json"] for d in client[meta]["connections"].find()]

    harness = Harness("real", make(), user, make, box, raw)
    harness._cleanup.append(lambda: (client.drop_database(meta), client.drop_database(user)))
    harness._cleanup.append(client.close)
    return harness


@pytest.fixture(params=LANES)
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    """A fresh store per test, for each lane."""
    lane = request.param
    h = _sqlite(tmp_path) if lane == "sqlite" else _mongomock() if lane == "mongomock" else _real()
    try:
        yield h
    finally:
        h.stores.close()
        for cleanup in h._cleanup:
            cleanup()


@pytest.fixture
def stores(harness: Harness) -> Stores:
    """Shortcut for ``harness.stores``."""
    return harness.stores
