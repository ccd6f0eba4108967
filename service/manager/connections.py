"""The connection registry: built-in connections plus the stored ones.

Built in: `sample_stream_solar` (the generated solar stream) and `local` (the embedded
store, for DLQs). Stored connections keep their secrets for the engine; everything that
leaves the service goes through `ConnectionRecord.public()`, which strips them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from pipeline_stages._base import Problem, ProblemCode
from pipeline_stages._problems import loc_to_path
from service.errors import ConnectionExists, ConnectionInUse, ConnectionNotFound, RequestInvalid
from service.manager.connection_probe import settings_problems
from service.manager.stats import utc_now
from service.runtime.engine import Connection
from service.schemas.connections import ConnectionCreate
from service.stores import AlreadyExists, ConnectionRecord, ConnectionType, Stores

#: `(name, type)` of the connections every Sluice service has.
BUILTINS: dict[str, str] = {"sample_stream_solar": "Sample", "local": "Local"}

_ALL = 1_000_000


class ConnectionRegistry:
    """Create, list, look up and drop connections."""

    def __init__(self, stores: Stores) -> None:
        self._stores = stores

    def create(self, body: ConnectionCreate) -> dict[str, Any]:
        """Register a connection; `ConnectionExists` when the name is taken."""
        if body.name in BUILTINS:
            raise ConnectionExists(body.name)
        if body.type == "Kafka":
            _check_kafka_settings(body.stored_config())
        record = ConnectionRecord(
            name=body.name,
            type=ConnectionType(body.type),
            config=body.stored_config(),
            created_at=utc_now(),
        )
        try:
            created = self._stores.connections.create(record)
        except AlreadyExists:
            raise ConnectionExists(body.name) from None
        return public(created)

    def list(self, *, offset: int, limit: int) -> tuple[list[dict[str, Any]], int]:
        """A page of connections, built-ins first."""
        builtins = [builtin_public(name) for name in BUILTINS]
        stored, total = self._stores.connections.list(offset=0, limit=_ALL)
        everything = builtins + [public(record) for record in stored]
        return everything[offset : offset + limit], len(builtins) + total

    def get(self, name: str) -> dict[str, Any]:
        """One connection, secrets removed; `ConnectionNotFound` when unknown."""
        if name in BUILTINS:
            return builtin_public(name)
        record = self._stores.connections.get(name)
        if record is None:
            raise ConnectionNotFound(name)
        return public(record)

    def type_of(self, name: str) -> str | None:
        """The type of the named connection, or None."""
        if name in BUILTINS:
            return BUILTINS[name]
        record = self._stores.connections.get(name)
        return None if record is None else record.type.value

    def record(self, name: str) -> ConnectionRecord | None:
        """The stored record (secrets included) of a user connection."""
        return self._stores.connections.get(name)

    def for_engine(self) -> dict[str, Connection]:
        """Every stored connection with its secrets, for compiling pipelines."""
        stored, _ = self._stores.connections.list(offset=0, limit=_ALL)
        return {r.name: Connection(r.name, r.type.value, dict(r.config)) for r in stored}

    def drop(self, name: str, *, users: Callable[[str], Iterable[str]]) -> None:
        """Delete a connection nobody uses; `ConnectionInUse` for built-ins and used ones."""
        if name in BUILTINS:
            raise ConnectionInUse(f"{name!r} is built in and cannot be deleted")
        if self._stores.connections.get(name) is None:
            raise ConnectionNotFound(name)
        using = sorted(users(name))
        if using:
            raise ConnectionInUse(
                f"connection {name!r} is used by processor(s) {', '.join(using)}; "
                "drop or modify them first"
            )
        if not self._stores.connections.delete(name):
            raise ConnectionNotFound(name)


def public(record: ConnectionRecord) -> dict[str, Any]:
    """The API form of a stored connection (no secrets)."""
    clean = record.public()
    return {
        "name": clean.name,
        "type": clean.type.value,
        "builtIn": False,
        "createdAt": _iso(clean.created_at),
        **clean.config,
    }


def builtin_public(name: str) -> dict[str, Any]:
    """The API form of a built-in connection."""
    return {"name": name, "type": BUILTINS[name], "builtIn": True, "createdAt": None}


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def referenced_connections(value: Any) -> set[str]:
    """Every `connectionName` string anywhere in a pipeline or options document."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            name = item.get("connectionName")
            if isinstance(name, str):
                found.add(name)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _check_kafka_settings(config: dict[str, Any]) -> None:
    """`RequestInvalid` (422) naming each setting librdkafka refuses, at its JSON path, so a
    typo in `config` is reported when the connection is made, not when a processor starts."""
    found = settings_problems(config)
    if found:
        problems = [
            Problem(ProblemCode.INVALID_VALUE, loc_to_path("", loc), message)
            for loc, message in found
        ]
        raise RequestInvalid(problems[0].message, problems=problems)
