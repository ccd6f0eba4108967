"""The windowed workload the scale-out tests run on a local-mode and on a cluster service.

A `$tumblingWindow` (10 s, no allowed lateness, `idleTimeout` 3 s, DLQ to `local`) with a
`$group` per key, fed over HTTP ingest. Event times increase by 0.5 s per record except for
a few records far behind the watermark, which must go to the DLQ; the last windows close
through the idle timeout once ingest stops. `expected_counts` derives the number of windows
and late records from the data, so the tests know when a run is complete without sleeping.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from tests.e2e.service_process import poll

KEYS = ("a", "b", "c")
WINDOW_MS = 10_000


def pipeline(connection: str) -> list[dict[str, Any]]:
    """The processor's pipeline reading `connection`."""
    return [
        {"$source": {"connectionName": connection, "timeField": {"$toDate": "$t"}}},
        {
            "$tumblingWindow": {
                "interval": {"size": 10, "unit": "second"},
                "allowedLateness": {"size": 0, "unit": "second"},
                "idleTimeout": {"size": 3, "unit": "second"},
                "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}, "total": {"$sum": "$v"}}}],
            }
        },
    ]


def iso(ms: int) -> str:
    """An ISO-8601 UTC date at `ms` milliseconds after 2024-01-01."""
    seconds, millis = divmod(ms, 1000)
    minutes, seconds = divmod(seconds, 60)
    return f"2024-01-01T00:{minutes:02d}:{seconds:02d}.{millis:03d}Z"


def records(count: int, *, late_every: int = 20) -> list[dict[str, Any]]:
    """`count` on-time records (0.5 s apart); from 20 s on, every `late_every` records one
    record in the window two windows back, which the watermark closed already."""
    out: list[dict[str, Any]] = []
    for i in range(count):
        out.append({"id": i, "k": KEYS[i % 3], "v": i % 7, "t": iso(i * 500)})
        window = i * 500 // WINDOW_MS
        if window >= 2 and i % late_every == 0:
            late_ms = (window - 2) * WINDOW_MS + 1234
            out.append({"id": 10_000 + i, "k": "late", "v": 1, "t": iso(late_ms)})
    return out


def expected_counts(docs: list[dict[str, Any]]) -> tuple[int, int]:
    """`(windows, late records)`: on-time records are in order, late ones 25 s behind."""
    windows = {(d["k"], int(d["id"]) * 500 // WINDOW_MS) for d in docs if d["id"] < 10_000}
    return len(windows), sum(1 for d in docs if d["id"] >= 10_000)


@dataclass
class Outcome:
    """A run's results, with run-specific fields (times, ids) removed."""

    windows: list[tuple[Any, ...]]
    dlq: list[tuple[Any, ...]]
    sample_dlq: list[tuple[Any, ...]]


def _window(message: dict[str, Any]) -> tuple[Any, ...]:
    window = message["_stream_meta"]["window"]
    return (message["_id"], message["n"], message["total"], json.dumps(window, sort_keys=True))


def _late(record: dict[str, Any]) -> tuple[Any, ...]:
    missed = json.dumps(record.get("missedWindowStartTimes"), sort_keys=True)
    return (record["doc"]["id"], record["errInfo"]["reason"], missed)


def begin(client: httpx.Client, name: str) -> str:
    """Create and start the processor `name` on its own HttpIngest connection."""
    connection = f"{name}_in"
    created = client.post("/api/v1/connections", json={"name": connection, "type": "HttpIngest"})
    assert created.status_code == 201, created.text
    dlq = {"connectionName": "local", "db": "scale", "coll": f"{name}_dlq"}
    body = {"name": name, "pipeline": pipeline(connection), "options": {"dlq": dlq}}
    assert client.post("/api/v1/processors", json=body).status_code == 201
    started = client.post(f"/api/v1/processors/{name}:start")
    assert started.status_code == 200 and started.json()["state"] == "STARTED", started.text
    return connection


def feed(client: httpx.Client, name: str, chunk: list[dict[str, Any]]) -> None:
    """Post one chunk of records to the processor's connection."""
    accepted = client.post(f"/api/v1/ingest/{name}_in", json=chunk)
    assert accepted.status_code == 202 and accepted.json()["accepted"] == len(chunk)


def finish(
    client: httpx.Client, name: str, docs: list[dict[str, Any]], *, timeout: float = 240.0
) -> Outcome:
    """Wait until every window and late record of `docs` is in `/sample`; the results."""
    windows, late = expected_counts(docs)

    def complete() -> list[dict[str, Any]] | None:
        state = client.get(f"/api/v1/processors/{name}").json()
        assert state["state"] == "STARTED", f"processor left STARTED: {state}"
        messages = client.get(f"/api/v1/processors/{name}/sample", params={"limit": 1000})
        found = messages.json()["messages"]
        return found if len(found) >= windows + late else None

    messages = poll(
        complete,
        timeout=timeout,
        message=f"{name}: expected {windows} windows and {late} DLQ records in /sample",
        every=0.5,
    )
    stored = client.get(f"/api/v1/processors/{name}/dlq", params={"limit": 1000}).json()
    return Outcome(
        windows=sorted(_window(m) for m in messages if "_dlqMessage" not in m),
        dlq=sorted(_late(r) for r in stored["results"]),
        sample_dlq=sorted(_late(m["_dlqMessage"]) for m in messages if "_dlqMessage" in m),
    )


def run_scenarios(
    client: httpx.Client,
    scenarios: dict[str, list[list[dict[str, Any]]]],
    *,
    after_chunk: Callable[[int], None] | None = None,
    gap_seconds: float = 0.3,
) -> dict[str, Outcome]:
    """Start one processor per scenario, feed their chunks interleaved, collect the results.

    Chunks are posted `gap_seconds` apart, well below the idle timeout, so windows close on
    event time until ingest stops and only the last ones close on idleness.
    """
    for name in scenarios:
        begin(client, name)
    for index in range(max(len(c) for c in scenarios.values())):
        for name, chunks in scenarios.items():
            if index < len(chunks):
                feed(client, name, chunks[index])
        if after_chunk is not None:
            after_chunk(index)
        time.sleep(gap_seconds)
    return {
        name: finish(client, name, [d for chunk in chunks for d in chunk])
        for name, chunks in scenarios.items()
    }
