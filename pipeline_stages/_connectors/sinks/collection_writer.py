"""`$emit` to a collection: a MongoDB time-series collection, or a plain collection.

* `Cluster` + `timeseries`: the collection is created with Atlas's `timeseries` options when
  it does not exist, then each batch is inserted unordered. Time-series collections have no
  unique `_id` index, so inserting alone would duplicate a replayed batch: documents get the
  deterministic `_id` of their key when they have none, and a batch first looks up which
  `(_id, timeField)` pairs are stored already (one query bounded by the batch's time range,
  which the buckets index) and inserts the others. That makes a replay after a crash add
  nothing; it is not a guard against two writers racing on one collection.
* `Cluster` without `timeseries`, and `local` (SQLite has no time-series collections: the
  options are accepted and the collection is a plain one): an upsert by `_id`
  (`whenMatched: replace`), with the same deterministic `_id`s, so replays are harmless.

Per-document write errors (a missing or non-date `timeField`, a bad name) go to the DLQ
with operatorName `EmitOperator`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._connectors.ports import StoreError
from pipeline_stages._connectors.sinks.ids import effective_keys, failure_records
from pipeline_stages._connectors.sinks.plans import CollectionEmitPlan
from pipeline_stages._connectors.sinks.stored_text import insert_new_as_texts
from pipeline_stages._connectors.sinks.targets_grouping import (
    Pending,
    match_errors,
    write_by_collection,
)
from pipeline_stages._stream.batch import BatchResult


class CollectionEmitWriter:
    """Writes outputs to a collection (see the module docstring).

    Args:
        plan: The compiled `$emit`.
        open_store: Opens the `DocumentStore` of the connection (plain collections).
        open_client: Opens the connection's pymongo client (time series on a `Cluster`).
        processor: The processor name (DLQ records).
        embedded: The target is the embedded `local` store.
    """

    def __init__(
        self,
        plan: CollectionEmitPlan,
        *,
        open_store: Callable[[], Any],
        open_client: Callable[[], Any] | None,
        processor: str,
        embedded: bool,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.plan = plan
        self._open_store = open_store
        self._open_client = open_client
        self._processor = processor
        self._embedded = embedded
        self._clock = clock or (lambda: datetime.now(tz=UTC))
        self._created: set[tuple[str, str]] = set()

    @property
    def time_series(self) -> bool:
        """Whether documents go to a real MongoDB time-series collection."""
        return self.plan.timeseries is not None and not self._embedded

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Write the batch; returns DLQ records for the documents not written."""
        if not batch.outputs:
            return []
        keys = effective_keys(batch.outputs)
        if not self.time_series and insert_new_as_texts(
            self._open_store,
            batch.outputs,
            keys,
            db=self.plan.db,
            coll=self.plan.coll,
            embedded=self._embedded,
        ):
            return []
        failures = write_by_collection(
            batch.outputs,
            keys,
            db=self.plan.db,
            coll=self.plan.coll,
            embedded=self._embedded,
            assign_ids=True,
            write=self._time_series if self.time_series else self._upsert,
        )
        return failure_records(
            batch.outputs,
            keys,
            failures,
            operator=self.plan.operator,
            processor=self._processor,
            now=self._clock(),
        )

    def _upsert(self, db: str, coll: str, pending: Pending) -> list[tuple[int, str]]:
        try:
            result = self._open_store().merge(
                db, coll, [doc for _, doc in pending], when_matched="replace"
            )
        except StoreError as error:
            return [(index, error.message) for index, _ in pending]
        return match_errors(pending, result.errors)

    def _time_series(self, db: str, coll: str, pending: Pending) -> list[tuple[int, str]]:
        from pymongo.errors import BulkWriteError, InvalidName

        if self._open_client is None:  # plans for Cluster connections always have a client
            raise RuntimeError("a time-series $emit needs a MongoDB client")
        try:
            collection = self._collection(self._open_client(), db, coll)
        except InvalidName as error:
            return [(index, str(error)) for index, _ in pending]
        field = str((self.plan.timeseries or {})["timeField"])
        fresh = unseen(collection, pending, field)
        if not fresh:
            return []
        try:
            collection.insert_many([doc for _, doc in fresh], ordered=False)
        except BulkWriteError as error:
            return [
                (fresh[e["index"]][0], str(e.get("errmsg", "write error")))
                for e in error.details.get("writeErrors", [])
            ]
        return []

    def _collection(self, client: Any, db: str, coll: str) -> Any:
        from pymongo.errors import CollectionInvalid

        database = client[db]
        if (db, coll) not in self._created:
            try:
                database.create_collection(coll, timeseries=dict(self.plan.timeseries or {}))
            except CollectionInvalid:
                pass  # it exists already (created by an earlier run or by the user)
            self._created.add((db, coll))
        return database[coll]


def unseen(collection: Any, pending: Sequence[tuple[int, dict[str, Any]]], field: str) -> Pending:
    """The documents whose `(_id, <timeField>)` pair is not stored yet (see the module doc)."""
    times = [doc.get(field) for _, doc in pending]
    dated = [t for t in times if isinstance(t, datetime)]
    if not dated:
        return list(pending)
    query = {
        field: {"$gte": min(dated), "$lte": max(dated)},
        "_id": {"$in": [doc["_id"] for _, doc in pending]},
    }
    stored = {
        (repr(found["_id"]), found.get(field)) for found in collection.find(query, {field: 1})
    }
    return [(i, doc) for i, doc in pending if (repr(doc["_id"]), doc.get(field)) not in stored]
