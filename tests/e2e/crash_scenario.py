"""Input, pipelines, expected results and result readers of the crash-recovery test.

Everything here is deterministic: the input is generated from fixed rules, the expected
windows and DLQ records are computed in plain Python with Atlas's window arithmetic
(README, *Windows*), and results are read from a data directory after its service stopped,
normalised so two runs of the same processors (their ids are deterministic) compare equal.

Event times are in 2099 on purpose: a record that is not JSON takes its source timestamp
(the arrival or Kafka message time, i.e. now) as event time, and a watermark taken from
"now" must stay below every window of the test, or it would close them all at once.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: 2099-01-01T00:00:00Z.
BASE_MS = int(datetime(2099, 1, 1, tzinfo=UTC).timestamp() * 1000)
#: The document that closes every window of the test by event time (no idleTimeout).
CLOSER_MS = int(datetime(2100, 1, 1, tzinfo=UTC).timestamp() * 1000)
WINDOW_MS = 10_000
LATENESS_MS = 2_000
LATE_REASON = "Input document arrived late."

DB = "crash"
KAFKA_WINDOWS = "kafka_windows"
HTTP_WINDOWS = "http_windows"
HTTP_FILES = "http_files"
PROCESSORS = (KAFKA_WINDOWS, HTTP_WINDOWS, HTTP_FILES)
#: `$emit` directory under the File connection's root.
EMIT_PATH = "out"


def iso(ms: int) -> str:
    """`2099-01-01T00:00:01.500Z`."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Record:
    """One input record: a JSON document, or raw text that is not JSON (`doc` is None)."""

    text: str
    doc: dict[str, Any] | None


def generate(first_id: int, count: int) -> list[Record]:
    """`count` readings with out-of-order, late, failing and non-JSON records, then the closer.

    Rules (ids `first_id + i`): event time `i * 600 ms` after BASE_MS; every 29th record is
    1.5 s early (out of order, within the 2 s allowed lateness: accepted), every 37th is 14 s
    early (its window has closed: late, to the DLQ), every 43rd has `d: 0` (`$divide` by zero
    in `$addFields`: to the DLQ), and a record that is not JSON follows every 80th.
    """
    records: list[Record] = []
    for i in range(count):
        t = BASE_MS + i * 600
        if i % 29 == 11:
            t -= 1_500
        if i % 37 == 20:
            t -= 14_000
        doc = {
            "id": first_id + i,
            "k": "abcd"[(i * 7) % 4],
            "v": i % 9 + 1,
            "d": 0 if i % 43 == 30 else 1 + i % 3,
            "t": iso(t),
        }
        records.append(Record(json.dumps(doc), doc))
        if i % 80 == 79:
            records.append(Record(f"not json #{first_id + i}", None))
    closer = {"id": first_id + count, "k": "z", "v": 0, "d": 1, "t": iso(CLOSER_MS)}
    records.append(Record(json.dumps(closer), closer))
    return records


def ms_of(doc: dict[str, Any]) -> int:
    """A generated document's event time."""
    return int(datetime.fromisoformat(doc["t"].replace("Z", "+00:00")).timestamp() * 1000)


# --------------------------------------------------------------------------- expectation


@dataclass
class Expected:
    """What one stream must produce: window results, late and failing ids, emitted ids."""

    #: (window start ms, key) -> (count, sum of v, ids in arrival order).
    windows: dict[tuple[int, str], tuple[int, int, list[int]]] = field(default_factory=dict)
    late: dict[int, int] = field(default_factory=dict)  # id -> missed window start (ms)
    failed: list[int] = field(default_factory=list)  # `$divide` by zero
    not_json: list[str] = field(default_factory=list)
    #: Documents that pass `$addFields` (what the stateless `$emit` processor writes).
    passed: list[int] = field(default_factory=list)


def expect(records: list[Record]) -> Expected:
    """Atlas's tumbling-window rules, per document in arrival order (README, *Windows*).

    Watermark = the largest event time seen − 1 ms (every parsed document counts, failed
    ones too: it comes from the source); a document is late when its window has closed, i.e.
    `watermark − allowedLateness ≥ window end` before it arrives. The closer's watermark closes
    every window but its own, which stays open (no flush at the end of input).
    """
    out = Expected()
    watermark: int | None = None
    open_windows: dict[tuple[int, str], tuple[int, int, list[int]]] = {}
    for record in records:
        doc = record.doc
        if doc is None:
            out.not_json.append(record.text)
            continue
        t = ms_of(doc)
        if doc["d"] == 0:
            out.failed.append(doc["id"])
        else:
            out.passed.append(doc["id"])
            start = t - t % WINDOW_MS
            if watermark is not None and watermark - LATENESS_MS >= start + WINDOW_MS:
                out.late[doc["id"]] = start
            else:
                n, total, ids = open_windows.get((start, doc["k"]), (0, 0, []))
                open_windows[(start, doc["k"])] = (n + 1, total + doc["v"], [*ids, doc["id"]])
        watermark = t - 1 if watermark is None else max(watermark, t - 1)
    assert watermark is not None
    out.windows = {
        key: value
        for key, value in open_windows.items()
        if watermark - LATENESS_MS >= key[0] + WINDOW_MS
    }
    return out


# --------------------------------------------------------------------------- pipelines


def _source(
    connection: str, *, topic: str | None = None, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"connectionName": connection, "timeField": {"$toDate": "$t"}}
    if topic is not None:
        body["topic"] = topic
    body["config"] = {"auto_offset_reset": "earliest", **(config or {})}
    return {"$source": body}


def window_pipeline(source: dict[str, Any], coll: str) -> list[dict[str, Any]]:
    """`$addFields` (fails on `d: 0`) → 10 s tumbling `$group` per key → `$merge` to `local`.

    The `$project` drops the group key's `_id`, so each result gets the deterministic id of
    its window and key (README, *Delivery guarantees*): a replayed window upserts itself.
    """
    return [
        source,
        {"$addFields": {"inv": {"$divide": [360, "$d"]}}},
        {
            "$tumblingWindow": {
                "interval": {"size": WINDOW_MS // 1000, "unit": "second"},
                "allowedLateness": {"size": LATENESS_MS // 1000, "unit": "second"},
                "pipeline": [
                    {
                        "$group": {
                            "_id": "$k",
                            "n": {"$sum": 1},
                            "total": {"$sum": "$v"},
                            "ids": {"$push": "$id"},
                        }
                    }
                ],
            }
        },
        {
            "$project": {
                "_id": 0,
                "key": "$_id",
                "n": 1,
                "total": 1,
                "ids": 1,
                "start": {"$meta": "stream.window.start"},
            }
        },
        {"$merge": {"into": {"connectionName": "local", "db": DB, "coll": coll}}},
    ]


def file_pipeline(connection: str, files: str) -> list[dict[str, Any]]:
    """A stateless processor on the HTTP connection: `$addFields` → `$emit` to a File sink."""
    return [
        _source(connection),
        {"$addFields": {"inv": {"$divide": [360, "$d"]}}},
        {"$project": {"_id": 0, "id": 1, "k": 1, "inv": 1}},
        {"$emit": {"connectionName": files, "path": EMIT_PATH}},
    ]


def processors(topic: str) -> dict[str, list[dict[str, Any]]]:
    """The three processors of the test, by name (one Kafka, two on HTTP ingest)."""
    return {
        # Small micro-batches: the backlog takes many batches, so kills land mid-stream.
        KAFKA_WINDOWS: window_pipeline(
            _source("events", topic=topic, config={"maxOffsetsPerTrigger": 16}), KAFKA_WINDOWS
        ),
        HTTP_WINDOWS: window_pipeline(_source("readings"), HTTP_WINDOWS),
        HTTP_FILES: file_pipeline("readings", "files"),
    }


def dlq_option(name: str) -> dict[str, Any]:
    """Each processor's own DLQ collection in `local`."""
    return {"dlq": {"connectionName": "local", "db": DB, "coll": f"dlq_{name}"}}


# --------------------------------------------------------------------------- results


def canonical(value: Any) -> str:
    """A stable text form of a stored document (ObjectIds and dates as text)."""
    return json.dumps(value, sort_keys=True, default=str)


#: The stats counters compared with what the sinks hold.
COUNTERS = (
    "inputMessageCount",
    "inputMessageSize",
    "outputMessageCount",
    "outputMessageSize",
    "dlqMessageCount",
    "dlqMessageSize",
)


@dataclass
class Results:
    """What one data directory holds after its service stopped."""

    merged: dict[str, list[dict[str, Any]]]  # processor -> `$merge` collection
    dlq: dict[str, list[dict[str, Any]]]  # processor -> DLQ records
    emitted: list[dict[str, Any]]  # every line of every File sink file
    files: list[str]  # the File sink's file names
    temp_files: list[str]  # hidden temporary files left by a killed write
    stats: dict[str, dict[str, int]]  # processor -> its persisted counters


def persisted_stats(stores: Any) -> dict[str, dict[str, int]]:
    """Every processor's counters as its stats say (the stats ledger, as the API reads it)."""
    from service.manager.stats import LiveStats

    out = {}
    for name in PROCESSORS:
        record = stores.processors.get(name)
        if record is None:
            continue
        stats = LiveStats(record.stats, ledger=stores.stats.get(record.id)).snapshot()
        out[name] = {counter: int(stats[counter]) for counter in COUNTERS}
    return out


def read_stats(data_dir: Path) -> dict[str, dict[str, int]]:
    """`persisted_stats` of a data directory whose service is not running (killed)."""
    from service.stores import open_stores

    stores = open_stores(data_dir=data_dir)
    try:
        return persisted_stats(stores)
    finally:
        stores.close()


def read_results(data_dir: Path, files_root: Path) -> Results:
    """Read the `$merge` collections, the DLQs, the File sink and the stats of a stopped
    service."""
    from service.stores import DlqQuery, open_stores

    stores = open_stores(data_dir=data_dir)
    try:
        merged = {
            name: stores.documents.find(DB, name, sort=[("_id", 1)])
            for name in (KAFKA_WINDOWS, HTTP_WINDOWS)
        }
        dlq = {
            name: stores.dlq(DB, f"dlq_{name}").find(DlqQuery(processor=name))[0]
            for name in PROCESSORS
        }
        stats = persisted_stats(stores)
    finally:
        stores.close()
    directory = files_root / EMIT_PATH
    names = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    files = [n for n in names if not n.startswith(".")]
    emitted = [
        json.loads(line)
        for name in files
        for line in (directory / name).read_text().splitlines()
        if line.strip()
    ]
    temp = [n for n in names if n.startswith(".")]
    return Results(merged, dlq, emitted, files, temp, stats)


def comparable_dlq(record: dict[str, Any]) -> str:
    """A DLQ record without the fields that record when it was written (`dlqTime`)."""
    return canonical({k: v for k, v in record.items() if k not in ("dlqTime", "instanceName")})


def duplicates(items: list[str]) -> list[str]:
    """The items that occur more than once."""
    return [item for item, count in Counter(items).items() if count > 1]
