"""The `$merge` writer: a micro-batch applied to `DocumentStore.merge`, errors to the DLQ.

Exactly-once effects: with `on: _id` (the default), a document without `_id` gets the
ObjectId of its deterministic key (`sinks.ids`), so every write is an upsert by a key that
is the same when Spark replays the batch; `replace`, `merge` and `keepExisting` applied twice
in the same order leave what they left once. (`whenMatched: delete` with `whenNotMatched:
insert` is not idempotent: a replay deletes what the first attempt inserted. The README
says so.) With other `on` fields the unique index plays the same role.

Per-document failures (a computed `db`/`coll` that is not a string, a duplicate key, an
immutable `_id`, a missing unique index) become DLQ records with operatorName
`MergeOperator`; the query carries on. Store outages raise, failing the micro-batch, which
the service retries from the checkpoint.

Retractions (issue 25: results of a window with `accumulationMode:
"accumulatingAndRetracting"` whose `_stream_meta.window.pane.retraction` is true) are not
written: the pane that follows a retraction re-emits its group under the same `_id`, which
replaces the retracted result. A pipeline whose stages after the window remove the stream
metadata makes retractions indistinguishable from results; they are then written too.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._connectors.ports import StoreError
from pipeline_stages._connectors.sinks.ids import effective_keys, failure_records
from pipeline_stages._connectors.sinks.panes import is_retraction
from pipeline_stages._connectors.sinks.plans import MergePlan
from pipeline_stages._connectors.sinks.stored_text import insert_new_as_texts
from pipeline_stages._connectors.sinks.targets_grouping import (
    Pending,
    match_errors,
    write_by_collection,
)
from pipeline_stages._stream.batch import BatchResult

#: `(index in batch.outputs, in-memory document)`.


class MergeWriter:
    """Writes a processor's outputs with `$merge` semantics (see the module docstring).

    Args:
        plan: The compiled `$merge`.
        open_store: Opens the target `DocumentStore` (called on the first write, inside the
            micro-batch, so an unreachable cluster fails the batch, not the start call).
        processor: The processor name (DLQ records).
        embedded: The target is the embedded `local` store: create the unique index a
            non-`_id` `on` needs (there is no other way to create one there; a `Cluster`
            target must have it, as in Atlas) and keep out of Sluice's reserved database.
    """

    def __init__(
        self,
        plan: MergePlan,
        *,
        open_store: Callable[[], Any],
        processor: str,
        embedded: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.plan = plan
        self._open_store = open_store
        self._store: Any = None
        self._processor = processor
        self._embedded = embedded
        self._indexed: set[tuple[str, str]] = set()
        self._clock = clock or (lambda: datetime.now(tz=UTC))

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Merge the batch's outputs but retractions; returns DLQ records for the documents
        not written."""
        outputs = [output for output in batch.outputs if not is_retraction(output.doc_json)]
        if not outputs:
            return []
        keys = effective_keys(outputs)
        plan = self.plan
        if (
            plan.on == ("_id",)
            and plan.when_not_matched == "insert"
            and insert_new_as_texts(
                self._target, outputs, keys, db=plan.db, coll=plan.coll, embedded=self._embedded
            )
        ):
            # What a `$merge` on `_id` that inserts what it does not find writes for new
            # documents, whatever `whenMatched` says.
            return []
        failures = write_by_collection(
            outputs,
            keys,
            db=self.plan.db,
            coll=self.plan.coll,
            embedded=self._embedded,
            assign_ids=self.plan.assigns_ids,
            write=self._merge,
        )
        return failure_records(
            outputs,
            keys,
            failures,
            operator=self.plan.operator,
            processor=self._processor,
            now=self._clock(),
        )

    def _target(self) -> Any:
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def _merge(self, db: str, coll: str, pending: Pending) -> list[tuple[int, str]]:
        """Merge one namespace's documents; `(index, message)` for each failure."""
        store = self._target()
        docs = [doc for _, doc in pending]
        try:
            self._ensure_index(store, db, coll)
            result = store.merge(
                db,
                coll,
                docs,
                on=list(self.plan.on),
                when_matched=self.plan.when_matched,
                when_not_matched=self.plan.when_not_matched,
            )
        except StoreError as error:
            # The whole namespace is unusable (bad name, missing unique index): every
            # document of it goes to the DLQ, the rest of the batch is written.
            return [(index, error.message) for index, _ in pending]
        return match_errors(pending, result.errors)

    def _ensure_index(self, store: Any, db: str, coll: str) -> None:
        if not self._embedded or self.plan.on == ("_id",) or (db, coll) in self._indexed:
            return
        store.ensure_unique_index(db, coll, list(self.plan.on))
        self._indexed.add((db, coll))
