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

import json
import re
import threading
import time
from collections import Counter
from typing import Any, Final

from pipeline_stages._base import Problem
from pipeline_stages._connectors.sources.http_ingest import encode_record
from pipeline_stages._connectors.sources.records import record_problem
from service.errors import ConnectionNotFound, ConnectionTypeMismatch, RequestInvalid
from service.manager.connections import ConnectionRegistry
from service.stores import Spool, SpoolError

JSON_TYPES = ("application/json",)
LINE_TYPES = ("application/x-ndjson", "application/jsonl", "application/json-lines", "text/plain")

EMPTY_BODY: Final = (
    "the body holds no record; send a JSON array of documents, one JSON document, or NDJSON lines"
)

_SPACE = re.compile(r"[ \t\n\r]*")
#: JSON string literals and the punctuation that structures an array (for `_cut_deep`).
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')
#: Finds record boundaries only; every record's content is judged by `record_problem`.
_DECODER = json.JSONDecoder()


def _skip_space(text: str, at: int) -> int:
    """The index of the first non-blank character at or after `at`."""
    match = _SPACE.match(text, at)
    return match.end() if match else at


def split_lines(body: bytes) -> list[bytes]:
    """NDJSON records: non-blank lines, without their line ending."""
    return [line.rstrip(b"\r") for line in body.split(b"\n") if line.strip()]


def split_json(body: bytes) -> list[bytes]:
    """Records of a JSON body, each as its bytes in the body: the elements of an array, or the
    value itself. Any depth is split (a record nesting deeper than Spark reads, more than
    `SPARK_MAX_DEPTH` levels, is one record the pipeline sends to the DLQ).

    Raises:
        ValueError: The body is not JSON (the message says where).
    """
    text = body.decode("utf-8")
    start = _skip_space(text, 0)
    if not text.startswith("[", start):
        try:
            json.loads(text)
        except RecursionError:
            pass  # deeper than Python's parser recurses: the record's verdict says more
        return [text.strip(" \t\n\r").encode("utf-8")]
    try:
        records, end = _cut_elements(text, start)
    except RecursionError:
        records, end = _cut_deep(text, start)
    _only_space_after(text, end)
    return [record.encode("utf-8") for record in records]


def _only_space_after(text: str, end: int) -> None:
    rest = _skip_space(text, end)
    if rest != len(text):
        raise ValueError(f"extra data after the JSON value at char {rest}")


def _cut_elements(text: str, start: int) -> tuple[list[str], int]:
    """The array's elements at `start` (with the stdlib's parser) and the end of the array."""
    i = _skip_space(text, start + 1)
    if text.startswith("]", i):
        return [], i + 1
    records: list[str] = []
    while True:
        _, end = _DECODER.raw_decode(text, i)
        records.append(text[i:end])
        i = _skip_space(text, end)
        if text.startswith(",", i):
            i = _skip_space(text, i + 1)
        elif text.startswith("]", i):
            return records, i + 1
        else:
            raise ValueError(f"expected ',' or ']' at char {i}")


def _cut_deep(text: str, start: int) -> tuple[list[str], int]:
    """`_cut_elements` for arrays whose elements nest deeper than Python's parser recurses:
    cut at the array's own commas (strings skipped), without parsing the elements."""
    depth, cuts = 0, [start]
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                cuts.append(match.start())
                pairs = zip(cuts, cuts[1:], strict=False)
                records = [text[a + 1 : b].strip(" \t\n\r") for a, b in pairs]
                return ([] if records == [""] else records), match.end()
        elif token == "," and depth == 1:
            cuts.append(match.start())
    raise ValueError("the array is not closed")


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

    def counters(self) -> tuple[dict[str, int], dict[str, int]]:
        """`(accepted, invalid)` record counts per connection since the service started."""
        with self._lock:
            return dict(self.accepted), dict(self.invalid)
