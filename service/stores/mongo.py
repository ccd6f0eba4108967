"""MongoDB stores on pymongo's synchronous ``MongoClient`` (any pymongo-compatible ``Database``).

Layout in the metadata database (the URI's default database, else ``sluice``):

* ``processors``: one document per processor; ``_id`` is the 24-hex id as a string, the
  pipeline is kept as the user's JSON text (``pipeline_json``), ``options``/``stats``/``error``
  are sub-documents. Unique index on ``name``.
* ``connections``: ``_id`` is the name; ``config`` is stored as relaxed-EJSON *text*
  (``config_json``) because Kafka configs use dotted keys such as ``sasl.password``; its
  secrets are sealed (:mod:`.secrets`), with a key that is not in the database.
* ``processor_stats``: one document per processor, its stats ledger as JSON text
  (``ledger_json``, :mod:`.stats_ledger`) and a version ``v`` for compare-and-set.

DLQ documents go to the configured ``db.coll`` exactly in Atlas's shape (§6.2), ``_id`` being
the writer's deterministic string id. The client must decode dates as aware datetimes
(``tz_aware=True``); the constructors refuse a database that does not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pymongo import ASCENDING, DESCENDING, MongoClient
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import BulkWriteError, DuplicateKeyError

from service.config.settings import default_data_dir

from .base import ConnectionRecord, DlqQuery, ProcessorRecord
from .codec import from_storage_json, to_storage_json, utc_ms
from .errors import AlreadyExists, Conflict, InvalidQuery, NotFound, StoreError
from .mongo_bulk import BulkWriter, bulk_write_unordered
from .mongo_documents import MongoDocumentStore, run_query
from .rules import check_namespace, check_paging, check_purge_query, prepare_dlq_document
from .secrets import SecretBox
from .stats_ledger import StatsLedger

DEFAULT_DATABASE = "sluice"
_PROCESSORS = "processors"
_CONNECTIONS = "connections"
_STATS = "processor_stats"
#: Compare-and-set attempts of a stats record before giving up (one writer per processor).
_STATS_ATTEMPTS = 20


class MongoProcessorStore:
    """:class:`~service.stores.base.ProcessorStore` on a MongoDB collection."""

    def __init__(self, collection: Collection[Any]) -> None:
        self._coll = collection
        self._coll.create_index([("name", ASCENDING)], unique=True)
        self._coll.create_index([("created_at", ASCENDING), ("_id", ASCENDING)])

    def create(self, record: ProcessorRecord) -> ProcessorRecord:
        """Stores a new record with version 1. Raises AlreadyExists on a taken name or id."""
        stored = record.evolve(version=1)
        try:
            self._coll.insert_one(_processor_doc(stored))
        except DuplicateKeyError:
            msg = f"a processor named {record.name!r} (or with id {record.id}) already exists"
            raise AlreadyExists(msg, path="/name") from None
        return stored

    def get(self, name: str) -> ProcessorRecord | None:
        """The processor called ``name``, or None."""
        doc = self._coll.find_one({"name": name})
        return None if doc is None else _processor_from_doc(doc)

    def get_by_id(self, processor_id: str) -> ProcessorRecord | None:
        """The processor with id ``processor_id``, or None."""
        doc = self._coll.find_one({"_id": processor_id})
        return None if doc is None else _processor_from_doc(doc)

    def update(self, record: ProcessorRecord) -> ProcessorRecord:
        """Compare-and-set on ``record.version``; returns the stored record (version + 1)."""
        stored = record.evolve(version=record.version + 1)
        try:
            result = self._coll.replace_one(
                {"_id": record.id, "version": record.version}, _processor_doc(stored)
            )
        except DuplicateKeyError:
            raise AlreadyExists(
                f"a processor named {record.name!r} already exists", path="/name"
            ) from None
        if result.matched_count == 1:
            return stored
        current = self._coll.find_one({"_id": record.id}, {"version": 1})
        if current is None:
            raise NotFound(f"processor {record.id} does not exist", path="/id")
        msg = f"processor {record.name!r} changed (version {current['version']}, not {record.version})"
        raise Conflict(msg, path="/version")

    def delete(self, name: str) -> bool:
        """Deletes the processor; False if there was none."""
        return self._coll.delete_one({"name": name}).deleted_count > 0

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[list[ProcessorRecord], int]:
        """A page ordered by ``(created_at, id)`` and the total count."""
        check_paging(offset=offset, limit=limit)
        total = self._coll.count_documents({})
        if limit == 0:
            return [], total  # pymongo reads limit 0 as "no limit"
        cursor = self._coll.find().sort([("created_at", ASCENDING), ("_id", ASCENDING)])
        return [_processor_from_doc(d) for d in cursor.skip(offset).limit(limit)], total


class MongoConnectionStore:
    """:class:`~service.stores.base.ConnectionStore` on a MongoDB collection; secrets sealed.

    Opening the store seals documents an earlier version wrote in plain text (or with an older
    key) and checks that every document opens with the key.
    """

    def __init__(self, collection: Collection[Any], secrets: SecretBox) -> None:
        self._coll = collection
        self._secrets = secrets
        for doc in self._coll.find({}, {"config_json": 1}):
            config = from_storage_json(doc["config_json"])
            secrets.open_config(config, name=str(doc["_id"]))  # refuses a wrong key now
            if secrets.needs_sealing(config):
                sealed = to_storage_json(secrets.seal_config(config))
                self._coll.update_one(
                    {"_id": doc["_id"], "config_json": doc["config_json"]},
                    {"$set": {"config_json": sealed}},
                )

    def create(self, record: ConnectionRecord) -> ConnectionRecord:
        """Stores a new connection. Raises AlreadyExists on a taken name."""
        record = record.evolve()  # re-validate: model_copy(update=...) skips validation
        doc = {
            "_id": record.name,
            "type": record.type.value,
            "config_json": to_storage_json(self._secrets.seal_config(record.config)),
            "created_at": record.created_at,
        }
        try:
            self._coll.insert_one(doc)
        except DuplicateKeyError:
            raise AlreadyExists(
                f"a connection named {record.name!r} already exists", path="/name"
            ) from None
        return record

    def get(self, name: str) -> ConnectionRecord | None:
        """The connection called ``name`` (secrets included), or None."""
        doc = self._coll.find_one({"_id": name})
        return None if doc is None else self._from_doc(doc)

    def delete(self, name: str) -> bool:
        """Deletes the connection; False if there was none."""
        return self._coll.delete_one({"_id": name}).deleted_count > 0

    def list(self, *, offset: int = 0, limit: int = 100) -> tuple[list[ConnectionRecord], int]:
        """A page ordered by name and the total count."""
        check_paging(offset=offset, limit=limit)
        total = self._coll.count_documents({})
        if limit == 0:
            return [], total
        cursor = self._coll.find().sort("_id", ASCENDING).skip(offset).limit(limit)
        return [self._from_doc(d) for d in cursor], total

    def _from_doc(self, doc: dict[str, Any]) -> ConnectionRecord:
        config = from_storage_json(doc["config_json"])
        return ConnectionRecord(
            name=doc["_id"],
            type=doc["type"],
            config=self._secrets.open_config(config, name=str(doc["_id"])),
            created_at=doc["created_at"],
        )


class MongoStatsStore:
    """:class:`~service.stores.base.StatsStore` on a MongoDB collection (compare-and-set on a
    version field: read, record, replace if unchanged, else read again)."""

    def __init__(self, collection: Collection[Any]) -> None:
        self._coll = collection

    def get(self, processor_id: str) -> StatsLedger | None:
        """The processor's ledger, or None before its first batch."""
        doc = self._coll.find_one({"_id": processor_id})
        return None if doc is None else StatsLedger.from_json(doc["ledger_json"])

    def record(
        self,
        processor_id: str,
        lane: str,
        generation: int,
        batch_id: int,
        part: Mapping[str, Any],
        *,
        seed: Mapping[str, Any] | None = None,
    ) -> StatsLedger:
        """Record one batch's counts (a replay replaces them) and return the stored ledger."""
        for _ in range(_STATS_ATTEMPTS):
            doc = self._coll.find_one({"_id": processor_id})
            ledger = (
                StatsLedger.seeded(seed)
                if doc is None
                else StatsLedger.from_json(doc["ledger_json"])
            )
            updated = ledger.record(lane, generation, batch_id, part)
            if updated is None:
                return ledger
            if doc is None:
                try:
                    self._coll.insert_one(
                        {"_id": processor_id, "ledger_json": updated.to_json(), "v": 1}
                    )
                except DuplicateKeyError:
                    continue
                return updated
            result = self._coll.replace_one(
                {"_id": processor_id, "v": doc["v"]},
                {"ledger_json": updated.to_json(), "v": doc["v"] + 1},
            )
            if result.matched_count == 1:
                return updated
        raise Conflict(f"the stats of processor {processor_id} kept changing", path="/stats")

    def delete(self, processor_id: str) -> bool:
        """Forget a processor's ledger (the processor was dropped)."""
        return self._coll.delete_one({"_id": processor_id}).deleted_count > 0


class MongoDlqStore:
    """:class:`~service.stores.base.DlqStore` on one MongoDB collection (Atlas's DLQ shape).

    ``DlqQuery.filter`` is sent to the server, ANDed with the typed conditions.
    """

    def __init__(self, collection: Collection[Any]) -> None:
        self._coll = collection
        for keys in (
            [("processorName", ASCENDING), ("dlqTime", ASCENDING), ("_id", ASCENDING)],
            [("processorName", ASCENDING), ("errInfo.reason", ASCENDING), ("dlqTime", ASCENDING)],
            [("processorName", ASCENDING), ("operatorName", ASCENDING), ("dlqTime", ASCENDING)],
        ):
            self._coll.create_index(keys)

    def upsert_many(self, processor: str, docs: Sequence[Mapping[str, Any]]) -> int:
        """Inserts documents whose ``_id`` is new in this collection; returns how many."""
        prepared = [prepare_dlq_document(processor, d, index=i) for i, d in enumerate(docs)]
        if not prepared:
            return 0
        try:
            return len(self._coll.insert_many(prepared, ordered=False).inserted_ids)
        except BulkWriteError as exc:
            # Duplicate _id (code 11000) is the replay case: the record is already stored.
            others = [e for e in exc.details.get("writeErrors", []) if e.get("code") != 11000]
            if others:
                raise StoreError(
                    f"DLQ write failed: {others[0].get('errmsg')}", code="write_failed"
                ) from exc
            return int(exc.details.get("nInserted", 0))

    def find(self, query: DlqQuery) -> tuple[list[dict[str, Any]], int]:
        """A page of matching documents (by ``dlqTime`` then ``_id``) and the total count."""
        where = _dlq_filter(query)
        total = run_query(lambda: self._coll.count_documents(where))
        if query.limit == 0:
            return [], total
        direction = DESCENDING if query.newest_first else ASCENDING
        cursor = self._coll.find(where).sort([("dlqTime", direction), ("_id", direction)])
        cursor = cursor.skip(query.skip)
        if query.limit is not None:
            cursor = cursor.limit(query.limit)
        return run_query(lambda: list(cursor)), total

    def count(self, query: DlqQuery) -> int:
        """How many documents match (skip and limit are ignored)."""
        where = _dlq_filter(query)
        return int(run_query(lambda: self._coll.count_documents(where)))

    def purge(self, query: DlqQuery) -> int:
        """Deletes every match and returns the number deleted."""
        check_purge_query(query)
        where = _dlq_filter(query)
        return int(run_query(lambda: self._coll.delete_many(where).deleted_count))

    def mark_replayed(
        self, processor: str, ids: Sequence[str], *, target: str, at: datetime
    ) -> int:
        """Adds ``target`` to ``replayedTo`` and sets ``replayedAt`` (see the protocol)."""
        if not ids:
            return 0
        where = {
            "_id": {"$in": list(ids)},
            "processorName": processor,
            "replayedTo": {"$ne": target},
        }
        change = {"$set": {"replayedAt": utc_ms(at)}, "$push": {"replayedTo": target}}
        return int(run_query(lambda: self._coll.update_many(where, change).modified_count))


class MongoStores:
    """Every store on one MongoDB database (plus DLQ/documents anywhere on its server).

    Args:
        database: A pymongo-compatible ``Database`` whose client decodes aware datetimes.
        secrets: Seals connection secrets; default: ``SLUICE_SECRET_KEY``, else the key file
            of the default data directory (``~/.sluice/secret.key``; :meth:`SecretBox.load`).
        bulk_writer: See :mod:`.mongo_bulk` (mongomock needs the emulation).
        owns_client: Close the client in :meth:`close` (true when built from a URI).
    """

    def __init__(
        self,
        database: Database[Any],
        *,
        secrets: SecretBox | None = None,
        bulk_writer: BulkWriter = bulk_write_unordered,
        owns_client: bool = False,
    ) -> None:
        if not database.codec_options.tz_aware:
            raise ValueError(
                "create the MongoClient with tz_aware=True: stores return aware datetimes"
            )
        self.database = database
        if secrets is None:
            secrets = SecretBox.load(data_dir=default_data_dir())
        self.processors = MongoProcessorStore(database[_PROCESSORS])
        self.connections = MongoConnectionStore(database[_CONNECTIONS], secrets)
        self.stats = MongoStatsStore(database[_STATS])
        reserved = frozenset(
            {(database.name, name) for name in (_PROCESSORS, _CONNECTIONS, _STATS)}
        )
        self.documents = MongoDocumentStore(
            database.client, bulk_writer=bulk_writer, reserved=reserved
        )
        self._reserved = reserved
        self._dlqs: dict[tuple[str, str], MongoDlqStore] = {}
        self._owns_client = owns_client

    @classmethod
    def from_uri(cls, uri: str, *, secrets: SecretBox | None = None) -> MongoStores:
        """Connects with ``tz_aware=True``; the URI's default database, else ``sluice``."""
        client: MongoClient[dict[str, Any]] = MongoClient(uri, tz_aware=True)
        database = client.get_default_database(DEFAULT_DATABASE)
        return cls(database, secrets=secrets, owns_client=True)

    def dlq(self, db: str, coll: str) -> MongoDlqStore:
        """The DLQ collection ``db.coll`` (indexes are created on first use)."""
        check_namespace(db, coll)
        if (db, coll) in self._reserved:
            raise InvalidQuery(f"{db}.{coll} holds Sluice's own metadata", path="/coll")
        if (db, coll) not in self._dlqs:
            self._dlqs[(db, coll)] = MongoDlqStore(self.database.client[db][coll])
        return self._dlqs[(db, coll)]

    def close(self) -> None:
        """Closes the client if this object created it."""
        if self._owns_client:
            self.database.client.close()


def _dlq_filter(query: DlqQuery) -> dict[str, Any]:
    where: dict[str, Any] = {"processorName": query.processor}
    clauses: list[dict[str, Any]] = []
    if query.reason is not None:
        where["errInfo.reason"] = query.reason
    if query.reason_contains is not None:
        pattern = {"$regex": re.escape(query.reason_contains), "$options": "i"}
        clauses.append({"errInfo.reason": pattern})
    if query.replayed is not None:
        clauses.append({"replayedTo.0": {"$exists": query.replayed}})
    if query.replayed_to is not None:
        clauses.append({"replayedTo": query.replayed_to})
    if query.not_replayed_to is not None:
        clauses.append({"replayedTo": {"$ne": query.not_replayed_to}})
    if query.operator_name is not None:
        where["operatorName"] = query.operator_name
    bounds = {}
    if query.dlq_time_from is not None:
        bounds["$gte"] = query.dlq_time_from
    if query.dlq_time_to is not None:
        bounds["$lt"] = query.dlq_time_to
    if bounds:
        where["dlqTime"] = bounds
    clauses.extend([query.filter] if query.filter else [])
    return {"$and": [where, *clauses]} if clauses else where


def _processor_doc(record: ProcessorRecord) -> dict[str, Any]:
    doc = record.model_dump(mode="python", exclude={"id"})
    doc["state"] = record.state.value
    return {"_id": record.id, **doc}


def _processor_from_doc(doc: dict[str, Any]) -> ProcessorRecord:
    fields = {k: v for k, v in doc.items() if k != "_id"}
    return ProcessorRecord(id=doc["_id"], **fields)
