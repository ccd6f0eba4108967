"""The change-stream source: `$source` on a `Cluster` connection (pymongo `watch()`).

A collection (`db` + `coll`), several collections of a database (`coll` as an array), a
database (`db` only) or the whole cluster (neither) is watched with Atlas's options
(`fullDocument`, `fullDocumentBeforeChange`, `fullDocumentOnly`, `pipeline`,
`maxAwaitTimeMS`, `startAfter` / `startAtOperationTime`).

Offsets are `{"token": <resume token, canonical Extended JSON text>, "seq": n}`: every
event up to the one with that resume token has been read, `n` events in all. The driver
plans a batch by reading the events after the start token (`latestOffset`) and hands them to
the batch's partition; a batch replayed after a restart re-reads the events between its two
tokens with `startAfter`, so it yields the same events (while the oplog still holds them).
Without `startAfter` a new query starts at the stream's current resume token (Spark does
not checkpoint a Python source's initial offset: like Kafka's `latest`, a query restarted
before its first batch committed starts at the then-current position).

Everything that decides what is read (offset parsing, `watch()` arguments, the rows built
from an event) is in pure functions with unit tests; only `ChangeStreamReader` talks to a
server, and it is tested against a real one when `MONGODB_URI` is set.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bson import json_util
from bson.timestamp import Timestamp
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._connectors.sources.raw_source import RawRecordSource
from pipeline_stages._connectors.sources.records import source_record

FORMAT = "sluice_change_stream"
#: `_stream_meta.source.type` of change events (atlas-semantics.md §5).
SOURCE_TYPE = "atlas"
DEFAULT_MAX_PER_BATCH = 1_000
#: How long `latestOffset` waits for new events before reporting none.
DEFAULT_AWAIT_MS = 200
#: How long a replayed batch may take to find its end token again.
REPLAY_TIMEOUT_S = 60.0


def token_text(token: Mapping[str, Any] | None) -> str | None:
    """A resume token as canonical Extended JSON (types survive the JSON checkpoint)."""
    if token is None:
        return None
    return json_util.dumps(token, json_options=json_util.CANONICAL_JSON_OPTIONS)


def token_value(text: str | None) -> Any:
    """The resume token of `token_text`'s output."""
    return None if text is None else json_util.loads(text)


@dataclass(frozen=True)
class StreamPosition:
    """An offset of the change-stream source (see the module docstring)."""

    token: str | None = None
    seq: int = 0

    @classmethod
    def parse(cls, offset: Mapping[str, Any]) -> StreamPosition:
        """The position of an offset dict as stored in the checkpoint."""
        token = offset.get("token")
        return cls(token if isinstance(token, str) else None, int(offset.get("seq", 0)))

    def to_offset(self) -> dict[str, Any]:
        """The JSON-able offset."""
        return {"token": self.token, "seq": self.seq}


def operation_time(value: Any) -> Timestamp | None:
    """`startAtOperationTime` as a BSON timestamp: `{$timestamp}`, a `{$date}` or None."""
    if value is None:
        return None
    parsed = json_util.loads(json.dumps(value)) if isinstance(value, dict) else value
    if isinstance(parsed, Timestamp):
        return parsed
    if isinstance(parsed, datetime):
        return Timestamp(int(parsed.timestamp()), 0)
    raise ValueError(f"startAtOperationTime must be a timestamp or a date, got {value!r}")


def watch_arguments(options: Mapping[str, Any], token: str | None) -> dict[str, Any]:
    """Keyword arguments of `watch()` from the source options and a resume position.

    A stored token wins over `startAtOperationTime`, which only places a query's first read.
    """
    args: dict[str, Any] = {
        "pipeline": list(options.get("pipeline") or []),
        "max_await_time_ms": int(options.get("maxAwaitTimeMS") or DEFAULT_AWAIT_MS),
    }
    if options.get("fullDocument", "default") != "default":
        args["full_document"] = options["fullDocument"]
    if options.get("fullDocumentBeforeChange", "off") != "off":
        args["full_document_before_change"] = options["fullDocumentBeforeChange"]
    if token is not None:
        args["start_after"] = token_value(token)
    elif options.get("startAtOperationTime") is not None:
        args["start_at_operation_time"] = operation_time(options["startAtOperationTime"])
    return args


def target_pipeline(coll: Any) -> list[dict[str, Any]]:
    """The `$match` narrowing a database stream to several collections (`coll` array)."""
    if isinstance(coll, list):
        return [{"$match": {"ns.coll": {"$in": coll}}}]
    return []


def event_row(event: Mapping[str, Any], seq: int, *, full_document_only: bool) -> tuple[Any, ...]:
    """The raw-record row (`RAW_SCHEMA`) of one change event."""
    doc = event.get("fullDocument") if full_document_only else event
    text = json_util.dumps(doc, json_options=json_util.RELAXED_JSON_OPTIONS)
    when = event.get("wallTime") or event.get("clusterTime")
    if isinstance(when, Timestamp):
        ts_ms = when.time * 1000
    elif isinstance(when, datetime):
        ts_ms = int(when.timestamp() * 1000)
    else:
        ts_ms = 0
    meta: dict[str, Any] = {"type": SOURCE_TYPE, "operationType": event.get("operationType")}
    if "ns" in event:
        meta["ns"] = event["ns"]
    key = event.get("documentKey")
    if isinstance(key, Mapping) and "_id" in key:
        meta["documentKey"] = {"_id": key["_id"]}
    meta_text = json_util.dumps(meta, json_options=json_util.RELAXED_JSON_OPTIONS)
    raw, error = source_record(text)
    return (0, seq, raw, ts_ms, meta_text, error)


def rows_between(
    events: Sequence[Mapping[str, Any]], start: StreamPosition, *, full_document_only: bool
) -> list[tuple[Any, ...]]:
    """The rows of a batch's events, numbered after the start position."""
    return [
        event_row(event, start.seq + i + 1, full_document_only=full_document_only)
        for i, event in enumerate(events)
    ]


class _Batch(InputPartition):
    def __init__(self, start: dict[str, Any], end: dict[str, Any], events: list[Any] | None):
        self.start = start
        self.end = end
        self.events = events


class ChangeStreamReader(DataSourceStreamReader):
    """See the module docstring."""

    def __init__(self, options: dict[str, str]) -> None:
        self.uri = options["uri"]
        self.db: str | None = options.get("db") or None
        self.coll: Any = json.loads(options.get("coll") or "null")
        self.options: dict[str, Any] = json.loads(options.get("options") or "{}")
        self.max_per_batch = max(1, int(options.get("maxrecordsperbatch", DEFAULT_MAX_PER_BATCH)))
        self._client: Any = None
        self._planned: dict[tuple[str | None, str | None], list[Any]] = {}

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled to the Python workers that run `read`: a client (sockets,
        # threads) cannot travel, and planned events travel in the partitions instead.
        return {**self.__dict__, "_client": None, "_planned": {}}

    def _watch(self, token: str | None) -> Any:
        from pymongo import MongoClient

        if self._client is None:
            self._client = MongoClient(self.uri, tz_aware=True)
        args = watch_arguments(self.options, token)
        args["pipeline"] = target_pipeline(self.coll) + args["pipeline"]
        if self.db is None:
            return self._client.watch(**args)
        if isinstance(self.coll, str):
            return self._client[self.db][self.coll].watch(**args)
        return self._client[self.db].watch(**args)

    def initialOffset(self) -> dict[str, Any]:
        """`startAfter` when given, else the stream's current resume token."""
        start = self.options.get("startAfter")
        if start is not None:
            return StreamPosition(token_text(start)).to_offset()
        with self._watch(None) as stream:
            stream.try_next()  # opens the cursor: the server reports its resume token
            return StreamPosition(token_text(stream.resume_token)).to_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        """Bound a catch-up batch."""
        return ReadMaxRows(self.max_per_batch)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """Read the events available after `start` (up to the limit) and keep them."""
        position = StreamPosition.parse(start)
        most = None if isinstance(limit, ReadAllAvailable) else self.max_per_batch
        if isinstance(limit, ReadMaxRows):
            most = limit.max_rows
        events: list[Any] = []
        with self._watch(position.token) as stream:
            while most is None or len(events) < most:
                event = stream.try_next()
                if event is None:
                    break
                events.append(event)
        if not events:
            return position.to_offset()
        end = StreamPosition(token_text(events[-1]["_id"]), position.seq + len(events))
        self._planned[(position.token, end.token)] = events
        return end.to_offset()

    def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Events between two offsets (`$throttle`)."""
        return StreamPosition.parse(end).seq - StreamPosition.parse(start).seq

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One partition carrying the planned events (None on a replay: read them again)."""
        if start == end:
            return []
        events = self._planned.pop((start.get("token"), end.get("token")), None)
        return [_Batch(start, end, events)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        """Yield the batch's events as raw-record rows."""
        if not isinstance(partition, _Batch):
            raise TypeError(f"unexpected partition {partition!r}")
        start, end = StreamPosition.parse(partition.start), StreamPosition.parse(partition.end)
        events = partition.events
        if events is None:
            events = self._replay(start, end)
        only = bool(self.options.get("fullDocumentOnly"))
        yield from rows_between(events, start, full_document_only=only)

    def _replay(self, start: StreamPosition, end: StreamPosition) -> list[Any]:
        """The events between two tokens, read again (a batch replayed after a restart)."""
        events: list[Any] = []
        deadline = time.monotonic() + REPLAY_TIMEOUT_S
        with self._watch(start.token) as stream:
            while len(events) < end.seq - start.seq:
                if time.monotonic() > deadline:
                    raise TimeoutError("the change stream no longer holds a replayed batch")
                event = stream.try_next()
                if event is not None:
                    events.append(event)
        last = token_text(events[-1]["_id"]) if events else start.token
        if last != end.token:
            raise RuntimeError("a replayed change-stream batch ended on another resume token")
        return events

    def commit(self, end: dict[str, Any]) -> None:
        """Forget batches planned before `end` (they ran)."""
        self._planned = {k: v for k, v in self._planned.items() if k[0] == end.get("token")}

    def stop(self) -> None:
        """Close the client."""
        if self._client is not None:
            self._client.close()
            self._client = None


def source_options(spec: Any) -> dict[str, Any]:
    """The change-stream options of a `$source` spec, as Atlas spells them (JSON-able)."""
    config = spec.config
    options: dict[str, Any] = {
        "fullDocument": config.full_document,
        "fullDocumentBeforeChange": config.full_document_before_change,
        "fullDocumentOnly": config.full_document_only,
    }
    for alias, value in (
        ("startAfter", config.start_after),
        ("startAtOperationTime", config.start_at_operation_time),
        ("pipeline", config.pipeline),
        ("maxAwaitTimeMS", config.max_await_time_ms),
    ):
        if value is not None:
            options[alias] = value
    return options


def read_change_stream(spec: Any, ctx: Any, connection: Any, body: str) -> Any | None:
    """The stream of `$source` on a `Cluster` connection, or None (problem recorded)."""
    uri = connection.config.get("uri")
    if not isinstance(uri, str):
        ctx.problems.error(
            join_path(body, "connectionName"),
            ProblemCode.INVALID_VALUE,
            f"Cluster connection {connection.name!r} has no uri",
        )
        return None
    try:
        operation_time(spec.config.start_at_operation_time)
    except ValueError as error:
        ctx.problems.error(
            join_path(body, "config", "startAtOperationTime"), ProblemCode.INVALID_VALUE, str(error)
        )
        return None
    limit = getattr(spec.config, "max_offsets_per_trigger", None) or DEFAULT_MAX_PER_BATCH
    return (
        ctx.read_stream()
        .format(FORMAT)
        .option("uri", uri)
        .option("db", spec.db or "")
        .option("coll", json.dumps(spec.coll))
        .option("options", json.dumps(source_options(spec)))
        .option("maxRecordsPerBatch", str(limit))
        .load()
    )


class ChangeStreamDataSource(RawRecordSource):
    """Options: `uri`, `db`, `coll` (JSON), `options` (JSON of the source's config)."""

    format_name = FORMAT
    stream_reader = ChangeStreamReader
