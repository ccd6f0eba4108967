"""DLQ targets and DLQ inspection (`GET/DELETE /processors/{name}/dlq`).

A processor's DLQ is `options.dlq = {connectionName, db, coll}` on the built-in `local`
connection (the metadata store's DLQ collections) or on a `Cluster` connection (a MongoDB
deployment). Without `options.dlq`, the service-wide `SLUICE_DEFAULT_DLQ` (dev only) is used;
without either, DLQ records are counted and kept in the sample buffer only.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from pipeline_stages._base import Problem
from service.config.settings import Settings
from service.errors import DlqNotConfigured, RequestInvalid
from service.manager.connections import ConnectionRegistry
from service.schemas.processors import nesting_depth
from service.stores import (
    ClusterTarget,
    DlqQuery,
    DlqStore,
    InvalidQuery,
    ProcessorRecord,
    Stores,
    to_relaxed_ejson,
)


@dataclass(frozen=True)
class DlqFilters:
    """The filters of a DLQ request (all optional, ANDed)."""

    reason: str | None = None
    operator_name: str | None = None
    dlq_from: datetime | None = None
    dlq_to: datetime | None = None
    filter_json: str | None = None
    replayed: bool | None = None
    replayed_to: str | None = None
    limit: int | None = None
    skip: int = 0
    newest_first: bool = False


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def _parse_filter(text: str | None) -> dict[str, Any] | None:
    if text is None or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError as error:
        problem = Problem("json_invalid", "/query/filter", f"filter is not valid JSON: {error}")
        raise RequestInvalid("invalid DLQ filter", problems=[problem]) from None
    if not isinstance(value, dict):
        problem = Problem("dict_type", "/query/filter", "filter must be a JSON object (MQL)")
        raise RequestInvalid("invalid DLQ filter", problems=[problem])
    return value


def _presentable(doc: dict[str, Any]) -> dict[str, Any]:
    """The document, or a note in place of a `doc` nested too deeply to encode."""
    from service.manager.writers import MAX_MESSAGE_NESTING

    if nesting_depth(doc) <= MAX_MESSAGE_NESTING:
        return doc
    return {**doc, "doc": {"_sluiceNote": f"doc nested deeper than {MAX_MESSAGE_NESTING} levels"}}


def _invalid_query(error: InvalidQuery) -> RequestInvalid:
    path = "/query" + error.path if error.path.startswith("/filter") else "/query/filter"
    problem = Problem(error.code, path, error.message)
    return RequestInvalid("invalid DLQ query", problems=[problem])


class DlqTargets:
    """Opens the DLQ store of a target; inspects and purges a processor's DLQ."""

    def __init__(self, stores: Stores, connections: ConnectionRegistry, settings: Settings) -> None:
        self._stores = stores
        self._connections = connections
        self._settings = settings
        self._clusters: dict[str, ClusterTarget] = {}
        self._lock = threading.Lock()

    def target_of(self, dlq: Mapping[str, str] | None) -> tuple[str, str, str] | None:
        """`(connection, db, coll)` of a processor's DLQ, or of the default; None if none."""
        if dlq:
            return dlq["connectionName"], dlq["db"], dlq["coll"]
        return self._settings.default_dlq_target

    def open(self, dlq: Mapping[str, str] | None) -> DlqStore:
        """The DLQ store of `options.dlq` (or the default).

        Raises:
            DlqNotConfigured: Without a DLQ, or when its connection is not usable for one.
            pymongo.errors.PyMongoError: When a Cluster DLQ cannot be reached.
        """
        target = self.target_of(dlq)
        if target is None:
            raise DlqNotConfigured("no DLQ is configured")
        connection, db, coll = target
        if self._connections.type_of(connection) == "Local":
            return self._stores.dlq(db, coll)
        record = self._connections.record(connection)
        if record is None or record.type.value != "Cluster":
            raise DlqNotConfigured(f"DLQ connection {connection!r} is not a Cluster connection")
        with self._lock:
            cluster = self._clusters.get(connection)
            if cluster is None:
                cluster = self._clusters[connection] = ClusterTarget(str(record.config["uri"]))
        return cluster.dlq(db, coll)

    def query(self, record: ProcessorRecord, filters: DlqFilters) -> DlqQuery:
        """The store query of a request's filters (422 with paths for a bad filter)."""
        try:
            return DlqQuery(
                processor=record.name,
                reason_contains=filters.reason or None,
                replayed=filters.replayed,
                replayed_to=filters.replayed_to,
                operator_name=filters.operator_name,
                dlq_time_from=_aware(filters.dlq_from),
                dlq_time_to=_aware(filters.dlq_to),
                filter=_parse_filter(filters.filter_json),
                skip=filters.skip,
                limit=filters.limit,
                newest_first=filters.newest_first,
            )
        except ValidationError as error:
            problems = [
                Problem("invalid_query", "/query/filter", str(e.get("msg", "invalid filter")))
                for e in error.errors(include_url=False)
            ]
            raise RequestInvalid("invalid DLQ query", problems=problems) from None

    def store_of(self, record: ProcessorRecord) -> DlqStore:
        """The processor's DLQ store; `DlqNotConfigured` (404) without one."""
        dlq = record.options.get("dlq") or None
        if self.target_of(dlq) is None:
            raise DlqNotConfigured(
                f"processor {record.name!r} has no DLQ; set options.dlq with PATCH /processors/{{name}}"
            )
        return self.open(dlq)

    def find(
        self, record: ProcessorRecord, filters: DlqFilters
    ) -> tuple[list[dict[str, Any]], int]:
        """A page of the processor's DLQ documents (relaxed Extended JSON) and the total."""
        store = self.store_of(record)
        query = self.query(record, filters)
        try:
            docs, total = store.find(query)
        except InvalidQuery as error:
            raise _invalid_query(error) from None
        return [_presentable(to_relaxed_ejson(doc)) for doc in docs], total

    def purge(self, record: ProcessorRecord, filters: DlqFilters) -> int:
        """Delete the processor's DLQ documents matching the filters; returns how many."""
        store = self.store_of(record)
        query = self.query(record, filters)
        try:
            return store.purge(query)
        except InvalidQuery as error:
            raise _invalid_query(error) from None

    def close(self) -> None:
        """Close cluster clients."""
        with self._lock:
            clusters, self._clusters = list(self._clusters.values()), {}
        for cluster in clusters:
            cluster.close()
