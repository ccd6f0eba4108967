"""`POST /ingest/{connection}`: split a body into records and append them durably to the spool.

A body is a JSON array of documents (or one JSON object), or NDJSON (one record per line).
`Content-Type: application/json` means JSON; `application/x-ndjson` or `text/plain` mean
lines; anything else is sniffed (a body that parses as a JSON array is an array).

Records that are not JSON objects are *not* dropped: they are spooled as received and every
processor reading the connection sends them to its DLQ (§6.3 item 1). The response counts
them (`invalid`). NDJSON lines are spooled byte for byte; array elements are re-serialised
with Python's `json`, which keeps key order and `10` vs `10.0`.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any

from pipeline_stages._connectors.sources.http_ingest import encode_record
from service.errors import ConnectionNotFound, ConnectionTypeMismatch, RequestInvalid
from service.manager.connections import ConnectionRegistry
from service.stores import Spool, SpoolError

JSON_TYPES = ("application/json",)
LINE_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain")


def _is_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False


def split_lines(body: bytes) -> list[bytes]:
    """NDJSON records: non-blank lines, without their line ending."""
    return [line.rstrip(b"\r") for line in body.split(b"\n") if line.strip()]


def split_json(value: Any) -> list[bytes]:
    """Records of a parsed JSON body: the elements of an array, or the value itself."""
    items = value if isinstance(value, list) else [value]
    return [json.dumps(item, ensure_ascii=False).encode() for item in items]


def split_body(body: bytes, content_type: str | None) -> list[bytes]:
    """The records of an ingest body (see the module docstring).

    Raises:
        RequestInvalid: When a body declared as `application/json` is not JSON.
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    body = body.removeprefix(b"\xef\xbb\xbf")
    if media in LINE_TYPES:
        return split_lines(body)
    declared_json = media in JSON_TYPES or media.endswith("+json")
    if declared_json or body.lstrip()[:1] == b"[":
        try:
            return split_json(json.loads(body))
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            if declared_json:
                raise RequestInvalid(
                    f"the body is not valid JSON ({error}); send NDJSON as application/x-ndjson"
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
        invalid = sum(1 for record in records if not _is_object(record))
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

    def counters(self) -> tuple[dict[str, int], dict[str, int]]:
        """`(accepted, invalid)` record counts per connection since the service started."""
        with self._lock:
            return dict(self.accepted), dict(self.invalid)
