"""Where a processor's micro-batches go: its DLQ, its sample buffer, and its stats.

Every write is idempotent per batch id, because Spark replays the last micro-batch after a
crash with the same id and data: DLQ records have deterministic ids (first write wins),
sample messages are keyed by `(generation, batch id, index)` (a replay rewrites the same
keys), and stats count each batch id once (`LiveStats`).

Every processor keeps its recent output in the sample buffer (`sample` shows it, like an
Atlas `sp.process`); a pipeline ending in `$merge`/`$emit` also hands each batch to its sink
writer first (`pipeline_stages._connectors.sinks`), whose per-document failures join the batch's
DLQ records (stored, sampled and counted like the others); `outputMessageCount` counts only
the documents the sink wrote.

A document's content never fails a batch: the DLQ stores a record it cannot hold as it is
with the document as Extended JSON text under `docText` instead of `doc` (`DlqWriter`). Only
failures of the system (a store that cannot be reached, a full disk) fail a batch.
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from bson.errors import BSONError

from pipeline_stages._connectors.ports import NewDocumentTexts
from pipeline_stages._connectors.sinks.dispatch import (
    SinkWriter,
    apply_sink,
    close_sink,
    sink_requests,
)
from pipeline_stages._enrichment.operator_stats import add_operators, request_counts
from pipeline_stages._stream.batch import DOC_TEXT, BatchResult
from pipeline_stages._stream.outputs import PartitionSink
from service.manager.stats import LiveStats
from service.schemas.processors import nesting_depth
from service.stores import DlqStore, DocumentStore, InvalidDocument, from_relaxed_ejson

log = logging.getLogger("sluice.service")

#: The `local` database holding the per-processor sample buffers.
SAMPLE_DB = "sluice"

KIND_OUT = "out"
KIND_DLQ = "dlq"


def sample_collection(processor_id: str) -> str:
    """The sample buffer collection of a processor (by id: names can change)."""
    return f"samples.{processor_id}"


class SampleBuffer:
    """The most recent output documents and DLQ messages of one processor, in order.

    Documents are `{_id: "g:b:i", g, b, i, k: "out"|"dlq", m: <JSON text>}` where `g` is the
    checkpoint generation, `b` the batch id and `i` the position in the batch. The store keeps
    at least `capacity` messages and deletes the older ones by id once about half as many
    again have fallen out of the last `capacity` (the mirror knows which). Reads
    are served from an in-memory mirror of the last `capacity` messages, loaded from the
    store once (a read must not scan the collection: `sample` is a hot control endpoint).
    """

    def __init__(self, documents: DocumentStore, processor_id: str, *, capacity: int) -> None:
        self._documents = documents
        self._coll = sample_collection(processor_id)
        self.capacity = capacity
        self._lock = threading.Lock()
        self._mirror: list[tuple[tuple[int, int, int], str, str]] | None = None
        #: Ids of stored messages no longer among the last `capacity` (deleted in bulk).
        self._stale: list[str] = []

    def _loaded(self) -> list[tuple[tuple[int, int, int], str, str]]:
        """The mirror, loaded on first use (caller holds the lock)."""
        if self._mirror is None:
            docs = self._documents.find(SAMPLE_DB, self._coll, sort=[("g", 1), ("b", 1), ("i", 1)])
            self._mirror = [((d["g"], d["b"], d["i"]), d["k"], d["m"]) for d in docs]
            self._drop(self._mirror[: -self.capacity])
            del self._mirror[: -self.capacity]
        return self._mirror

    def _drop(self, items: Sequence[tuple[tuple[int, int, int], str, str]]) -> None:
        """Remember stored messages that fell out of the mirror, to delete (caller holds the
        lock)."""
        self._stale.extend("{}:{}:{}".format(*key) for key, _, _ in items)

    def append(
        self,
        generation: int,
        batch_id: int,
        messages: Sequence[tuple[str, str]],
        *,
        first_index: int = 0,
    ) -> None:
        """Store one batch's messages (kind, JSON text), replacing a replay's earlier write;
        `first_index` is the position of the first of them among the batch's messages (a
        writer hands over only a batch's last messages)."""
        if not messages:
            return
        docs = [
            {
                "_id": f"{generation}:{batch_id}:{i}",
                "g": generation,
                "b": batch_id,
                "i": i,
                "k": kind,
                "m": text,
            }
            for i, (kind, text) in enumerate(messages, start=first_index)
        ]
        try:
            if not self._insert_as_texts(docs):
                self._documents.merge(SAMPLE_DB, self._coll, docs, when_matched="replace")
        except UnicodeEncodeError:
            # Text no store holds (a lone surrogate): kept with the character escaped.
            messages = [(kind, str(_utf8(text))) for kind, text in messages]
            for doc, (_, text) in zip(docs, messages, strict=True):
                doc["m"] = text
            self._documents.merge(SAMPLE_DB, self._coll, docs, when_matched="replace")
        written = {doc["_id"] for doc in docs}
        with self._lock:
            mirror = self._loaded()
            while mirror and mirror[-1][0] >= (generation, batch_id, 0):
                # A replayed batch: its earlier messages are rewritten (or, with fewer
                # messages kept this time, deleted).
                key = mirror.pop()[0]
                if "{}:{}:{}".format(*key) not in written:
                    self._stale.append("{}:{}:{}".format(*key))
            mirror.extend(
                ((generation, batch_id, i), k, t)
                for i, (k, t) in enumerate(messages, start=first_index)
            )
            self._drop(mirror[: -self.capacity])
            del mirror[: -self.capacity]
            stale = self._stale if len(self._stale) > self.capacity // 2 else []
            if stale:
                self._stale = []
        if stale:
            self._trim(stale)

    def _insert_as_texts(self, docs: list[dict[str, Any]]) -> bool:
        """Insert a batch's messages as the store's text when the store takes texts and none
        of their ids is stored (a replay's are: it is merged), without the per-document
        normalising and keying of a merge (~30 us a message, on the micro-batch's path)."""
        if not isinstance(self._documents, NewDocumentTexts):
            return False
        rows = []
        for doc in docs:
            id_text = json.dumps(doc["_id"])
            text = (
                f'{{"_id":{id_text},"g":{doc["g"]},"b":{doc["b"]},"i":{doc["i"]},'
                f'"k":{json.dumps(doc["k"])},"m":{json.dumps(doc["m"], ensure_ascii=False)}}}'
            )
            rows.append((id_text, text))
        return self._documents.insert_new_texts(SAMPLE_DB, self._coll, rows)

    def _trim(self, stale: list[str]) -> None:
        """Delete messages that fell out of the last `capacity` (by id: no scan, no sort)."""
        self._documents.merge(
            SAMPLE_DB,
            self._coll,
            [{"_id": _id} for _id in stale],
            when_matched="delete",
            when_not_matched="discard",
        )

    def recent(
        self, limit: int, *, after: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Up to `limit` messages, oldest first, and the cursor of the last one.

        Without `after`, the most recent `limit` messages; with it, the `limit` oldest
        messages newer than that cursor (so a caller can follow the stream).
        """
        position = parse_cursor(after)
        with self._lock:
            mirror = self._loaded()
            if position is None:
                items = mirror[-limit:]
            else:
                first = bisect.bisect_right(mirror, position, key=lambda item: item[0])
                items = mirror[first : first + limit]
        messages = [_message(kind, text) for _, kind, text in items]
        cursor = ".".join(str(part) for part in items[-1][0]) if items else after
        return messages, cursor

    def drop(self) -> None:
        """Delete the buffer."""
        self._documents.drop(SAMPLE_DB, self._coll)
        with self._lock:
            self._mirror = []
            self._stale = []


def parse_cursor(cursor: str | None) -> tuple[int, int, int] | None:
    """`"g.b.i"` as integers; None for no cursor.

    Raises:
        ValueError: For a malformed cursor.
    """
    if cursor is None:
        return None
    parts = cursor.split(".")
    if len(parts) != 3 or not all(p.isdigit() and len(p) < 19 for p in parts):
        raise ValueError(f"malformed cursor {cursor!r}; pass a cursorId returned by sample")
    g, b, i = (int(p) for p in parts)
    return g, b, i


#: Messages nested deeper than this are replaced by a note (JSON encoders have depth limits).
MAX_MESSAGE_NESTING = 200


def _message(kind: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if value is None or nesting_depth(value) > MAX_MESSAGE_NESTING:
        value = {"_sluiceNote": f"message nested deeper than {MAX_MESSAGE_NESTING} levels"}
    return {"_dlqMessage": value} if kind == KIND_DLQ else value


#: What a store raises for a record's content (a value it cannot encode, a document BSON
#: cannot hold), as opposed to the store being unreachable, which fails the batch.
CONTENT_ERRORS = (
    InvalidDocument,
    BSONError,
    ValueError,
    TypeError,
    ArithmeticError,
    RecursionError,
    UnicodeError,
)


class DlqWriter:
    """Writes Atlas DLQ records (§6.2) to a DLQ collection, never failing on odd documents.

    The store is opened on the first write, inside the micro-batch: an unreachable DLQ
    (a `Cluster` connection that is down) is then a failure of the query, which the
    supervisor retries and finally reports on the processor, not an error of the start call.

    A record the store refuses for its content is stored again in a safe form: its document
    (and `_stream_meta`) as Extended JSON text, the document under `docText` instead of
    `doc` (see `pipeline_stages._stream.batch`), so the record is never lost.
    """

    def __init__(
        self, open_store: Callable[[], DlqStore], *, processor: str, instance: str
    ) -> None:
        self._open_store = open_store
        self._store: DlqStore | None = None
        self._processor = processor
        self._instance = instance

    def _target(self) -> DlqStore:
        if self._store is None:
            self._store = self._open_store()
        return self._store

    def write(self, records: Sequence[dict[str, Any]]) -> None:
        """Upsert the records (first write of an id wins, so replays are harmless)."""
        store = self._target()
        docs = [self._prepared_or_text(record) for record in records]
        try:
            store.upsert_many(self._processor, docs)
        except CONTENT_ERRORS:
            # One odd document must not fail the batch: store each on its own, in text form
            # when the store refuses it.
            for record, doc in zip(records, docs, strict=True):
                try:
                    store.upsert_many(self._processor, [doc])
                except CONTENT_ERRORS as error:
                    log.warning(
                        "DLQ record %s stored with its doc as text: %s",
                        doc["_id"],
                        getattr(error, "message", None) or str(error)[:200],
                    )
                    store.upsert_many(self._processor, [self._as_text(record)])

    def _prepared_or_text(self, record: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._prepare(record)
        except CONTENT_ERRORS:
            return self._as_text(record)

    def _prepare(self, record: dict[str, Any]) -> dict[str, Any]:
        doc = from_relaxed_ejson(record)
        doc["_id"] = (
            record["_id"]["$oid"] if isinstance(record["_id"], dict) else str(record["_id"])
        )
        doc["instanceName"] = self._instance
        return doc

    def _as_text(self, record: dict[str, Any]) -> dict[str, Any]:
        plain = {k: v for k, v in record.items() if k not in ("doc", "_stream_meta", DOC_TEXT)}
        doc = self._prepare(plain)
        if "_stream_meta" in record:
            doc["_stream_meta"] = _json_text(record["_stream_meta"])
        if "doc" in record:
            doc[DOC_TEXT] = _json_text(record["doc"])
        elif DOC_TEXT in record:
            doc[DOC_TEXT] = _json_text(record[DOC_TEXT], keep_strings=True)
        return _utf8(doc)


def _utf8(value: Any) -> Any:
    """`value` with every key and string made UTF-8 (a lone surrogate becomes `\\udXXX` text)."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value


def _json_text(value: Any, *, keep_strings: bool = False) -> str:
    """`value` as JSON text that any store holds (ASCII, so no lone surrogate survives)."""
    if keep_strings and isinstance(value, str):
        return str(_utf8(value))
    try:
        return json.dumps(value, ensure_ascii=True, default=str)
    except (ValueError, TypeError, RecursionError):
        return json.dumps(f"<a {type(value).__name__} that JSON cannot hold>")


class ProcessorWriter:
    """The `BatchWriter` of one processor run: sink, DLQ, sample buffer, stats.

    With a `PartitionSink` (or no sink) it writes summaries (`_engine.sink.SummaryWriter`):
    the sink writes each partition on the executors, and `write` receives the batch's DLQ
    records, its counts and only its last `sample_capacity` messages. With a driver-side
    `SinkWriter` (tests, tools) it receives whole batches and applies the sink itself.
    """

    def __init__(
        self,
        *,
        generation: int,
        stats: LiveStats,
        sample: SampleBuffer,
        dlq: DlqWriter | None,
        sink: SinkWriter | PartitionSink | None = None,
    ) -> None:
        self.generation = generation
        self.stats = stats
        self.sample = sample
        self.dlq = dlq
        self.sink = sink
        self.writes_summaries = sink is None or hasattr(sink, "write_partition")
        self.partition_sink = cast("PartitionSink | None", sink if self.writes_summaries else None)
        self.sample_capacity = sample.capacity

    def close(self) -> None:
        """Release the sink's resources (the Kafka producer) once the run has stopped."""
        close_sink(self.sink)

    def write(self, batch: BatchResult) -> None:
        """Write one micro-batch (idempotent per batch id)."""
        first = 0
        if batch.totals is None:
            # The sink first: its DLQ records (write errors) are then stored with the others.
            legacy = None if self.writes_summaries else cast("SinkWriter", self.sink)
            unwritten = apply_sink(legacy, batch)
            requests = sink_requests(legacy)
            if requests is not None:  # the sink's own operator stats
                batch.operators = add_operators(batch.operators, request_counts(requests))
            sizes = [
                len(o.doc_json.encode("utf-8", "surrogatepass"))
                for i, o in enumerate(batch.outputs)
                if i not in unwritten
            ]
            written, written_bytes = len(sizes), sum(sizes)
        else:
            written, written_bytes = batch.totals.written, batch.totals.written_bytes
            first = batch.totals.first_message
        dlq_texts = [_json_text(record) for record in batch.dlq]
        if batch.dlq and self.dlq is not None:
            self.dlq.write(batch.dlq)
        order = batch.order
        if len(order) > self.sample.capacity:  # only the last messages can be shown
            first += len(order) - self.sample.capacity
            order = order[-self.sample.capacity :]
        messages = [
            (KIND_OUT, batch.outputs[index].doc_json)
            if kind == KIND_OUT
            else (KIND_DLQ, dlq_texts[index])
            for kind, index in order
        ]
        self.sample.append(self.generation, batch.batch_id, messages, first_index=first)
        self.stats.record_batch(
            batch.batch_id,
            output_count=written,
            output_bytes=written_bytes,
            dlq_records=[
                (str(record.get("operatorName", "")), len(text.encode("utf-8")), _reason(record))
                for record, text in zip(batch.dlq, dlq_texts, strict=True)
            ],
            window_stats=batch.stats,
            input_metrics=batch.input,
            sink_operators=batch.operators,
        )


def _reason(record: Any) -> str:
    """A DLQ record's `errInfo.reason` (what `dlqByReason` counts)."""
    info = record.get("errInfo") if isinstance(record, dict) else None
    reason = info.get("reason") if isinstance(info, dict) else None
    return str(reason) if reason else "unknown"
