"""`sluice ingest CONNECTION FILE|-`: post a file in chunks, with a progress bar.

A file starting with `[` is a JSON array: it is sent as JSON arrays of whole documents.
Anything else is NDJSON: it is streamed in chunks of whole lines (a line longer than a chunk
is sent alone). Each chunk is acknowledged only after the service fsynced it, so an
interrupted upload can be resumed by re-sending the chunks that were not acknowledged.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from typing import BinaryIO

from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

from service.cli.client import SluiceClient
from service.cli.output import CliState, usage_error
from service.manager.ingest_records import split_json


def _ndjson_chunks(stream: BinaryIO, chunk_bytes: int) -> Iterator[bytes]:
    pending: list[bytes] = []
    size = 0
    for line in stream:
        if not line.strip():
            continue  # the service skips blank lines; a chunk of only those would be refused
        if size and size + len(line) > chunk_bytes:
            yield b"".join(pending)
            pending, size = [], 0
        pending.append(line if line.endswith(b"\n") else line + b"\n")
        size += len(line)
    if pending:
        yield b"".join(pending)


def _array_chunks(records: list[bytes], chunk_bytes: int) -> Iterator[bytes]:
    """Arrays of the records as they are in the file (never re-serialised: duplicate keys,
    escapes and `10.0` reach the service as written, as NDJSON lines do)."""
    pending: list[bytes] = []
    size = 0
    for record in records:
        if pending and size + len(record) > chunk_bytes:
            yield b"[" + b",".join(pending) + b"]"
            pending, size = [], 0
        pending.append(record)
        size += len(record) + 1
    if pending:
        yield b"[" + b",".join(pending) + b"]"


def _open(source: str) -> tuple[BinaryIO, int | None]:
    if source == "-":
        return sys.stdin.buffer, None
    handle = open(source, "rb")  # noqa: SIM115 - closed by the caller
    return handle, os.fstat(handle.fileno()).st_size


def _chunks(handle: BinaryIO, chunk_bytes: int, state: CliState) -> tuple[Iterator[bytes], str]:
    if not hasattr(handle, "peek"):
        handle = io.BytesIO(handle.read())
    head = handle.peek(64)[:64] if hasattr(handle, "peek") else handle.getvalue()[:64]  # type: ignore[attr-defined]
    if head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"[":
        try:
            records = split_json(handle.read().removeprefix(b"\xef\xbb\xbf"))
        except (ValueError, UnicodeDecodeError) as error:
            usage_error(state, f"the file looks like a JSON array but is not valid JSON: {error}")
        return _array_chunks(records, chunk_bytes), "application/json"
    return _ndjson_chunks(handle, chunk_bytes), "application/x-ndjson"


def send_file(
    client: SluiceClient, connection: str, source: str, *, chunk_bytes: int, state: CliState
) -> dict[str, int]:
    """Send the file chunk by chunk; returns `{accepted, invalid, requests}`."""
    try:
        handle, total = _open(source)
    except OSError as error:
        usage_error(state, f"cannot read {source}: {error}")
    totals = {"accepted": 0, "invalid": 0, "requests": 0}
    progress = Progress(
        TextColumn("ingest"),
        BarColumn(),
        DownloadColumn(),
        TimeRemainingColumn(),
        console=state.stderr,
        transient=True,
        disable=state.json or not state.stderr.is_terminal,
    )
    with handle, progress:
        task = progress.add_task("ingest", total=total)
        chunks, content_type = _chunks(handle, chunk_bytes, state)
        for chunk in chunks:
            body = client.ingest(connection, chunk, content_type=content_type)
            totals["accepted"] += int(body["accepted"])
            totals["invalid"] += int(body["invalid"])
            totals["requests"] += 1
            progress.advance(task, len(chunk))
    return totals
