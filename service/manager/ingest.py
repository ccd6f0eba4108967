"""`POST /ingest/{connection}`: split a body into records and append them durably to the spool.

A body is a JSON array of documents (or one JSON object), or NDJSON (one record per line).
`Content-Type: application/json` means JSON; `application/x-ndjson` or `text/plain` mean
lines; anything else is sniffed (a body that parses as a JSON array is an array). A body
without any record (empty, or only whitespace) is refused: it is almost always a client bug.

Records are spooled byte for byte as received, array elements too (their text is cut out of
the body, never re-serialised, so `10` vs `10.0`, key order, duplicate keys and escapes reach
the pipeline exactly as sent). Records the pipeline will not read are *not* dropped: they are
spooled and every processor reading the connection sends them to its DLQ with the reason
(§6.3 item 1). The response counts them (`invalid`), by the same verdict the source and
Spark's parser apply (`pipeline_stages._connectors.sources.records.record_problem`): not a
JSON object, `NaN`, duplicate keys, invalid UTF-8, an invalid Extended JSON value, nesting
deeper than Spark reads (`SPARK_MAX_DEPTH` levels).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Final

from pipeline_stages._base import Problem
from pipeline_stages._connectors.sources.http_ingest import encode_record
from pipeline_stages._connectors.sources.records import record_problem
from service.errors import ConnectionNotFound, ConnectionTypeMismatch, RequestInvalid
from service.manager.connections import ConnectionRegistry
from service.manager.ingest_records import split_json, split_lines
from service.stores import Spool, SpoolError

JSON_TYPES = ("application/json",)
LINE_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain")

EMPTY_BODY: Final = (
    "the body holds no record; send a JSON array of documents, one JSON document, or NDJSON lines"
)


def split_body(body: bytes, content_type: str | None) -> list[bytes]:
    """The records of an ingest body (see the module docstring).

    Raises:
        RequestInvalid: When the body holds no record, or a body declared as
            `application/json` is not JSON.
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    body = body.removeprefix(b"\xef\xbb\xbf")
    if not body.strip():
        raise RequestInvalid(EMPTY_BODY, problems=[Problem("empty_body", "", EMPTY_BODY)])
    if media in LINE_TYPES:
        return split_lines(body)
    declared_json = media in JSON_TYPES or media.endswith("+json")
    if declared_json or body.lstrip()[:1] == b"[":
        try:
            return split_json(body)
        except (ValueError, UnicodeDecodeError) as error:
            if declared_json:
                detail = (
                    f"the body is not valid JSON ({error}); send NDJSON as application/x-ndjson"
                )
                raise RequestInvalid(
                    detail, problems=[Problem("invalid_json", "", detail)]
                ) from None
    return split_lines(body)


class IngestService:
    """Appends posted records to the spool of an `HttpIngest` connection."""

    def __init__(self, spool: Spool, connections: ConnectionRegistry) -> None:
        self._spool = spool
        self._connections = connections
        self._lock = threading.Lock()
        self.accepted: Counter[str] = Counter()
        self.invalid: Counter[str] = Counter()

    def ingest(self, connection: str, body: bytes, content_type: str | None) -> dict[str, Any]:
        """Append the body's records durably; returns `{accepted, invalid, firstSeq, lastSeq}`."""
        kind = self._connections.type_of(connection)
        if kind is None:
            raise ConnectionNotFound(connection)
        if kind != "HttpIngest":
            raise ConnectionTypeMismatch(
                f"connection {connection!r} is a {kind} connection; ingest needs an HttpIngest one"
            )
        records = split_body(body, content_type)
        invalid = sum(1 for record in records if record_problem(record) is not None)
        if not records:
            return {"accepted": 0, "invalid": 0, "firstSeq": None, "lastSeq": None}
        arrival_ms = int(time.time() * 1000)
        try:
            first, last = self._spool.append(
                connection, [encode_record(record, arrival_ms) for record in records]
            )
        except SpoolError as error:
            raise RequestInvalid(str(error)) from None
        with self._lock:
            self.accepted[connection] += len(records)
            self.invalid[connection] += invalid
        return {"accepted": len(records), "invalid": invalid, "firstSeq": first, "lastSeq": last}

    def append_documents(self, connection: str, records: list[bytes]) -> None:
        """Append records to the spool as if they were posted now (DLQ replay); counted as
        accepted. The caller has checked the connection's type and each record."""
        arrival_ms = int(time.time() * 1000)
        try:
            self._spool.append(
                connection, [encode_record(record, arrival_ms) for record in records]
            )
        except SpoolError as error:
            raise RequestInvalid(str(error)) from None
        with self._lock:
            self.accepted[connection] += len(records)

    def counters(self) -> tuple[dict[str, int], dict[str, int]]:
        """`(accepted, invalid)` record counts per connection since the service started."""
        with self._lock:
            return dict(self.accepted), dict(self.invalid)
