"""Fuzz: extreme and malformed records through the sources (HttpIngest, File) into every sink
(`$merge` into `local`, `$emit` to File, the DLQ, the sample buffer) of the real service in
process (`service_harness`): every record is delivered or lands in the DLQ with a reason,
exactly once, and every processor keeps running.

A fixed catalogue covers dates out of range in every form, garbage `$numberDecimal`, huge and
tiny numbers, NaN/Infinity, text after the object (Spark's parser would keep the object and
drop the rest), nesting at and past every limit (100 levels for a collection and a DLQ
record, 1000 for Spark's parser), lone surrogates, invalid UTF-8 and a 16 MB document;
hypothesis adds a few bounded batches of random documents and bytes. For each HttpIngest
record, the DLQ holds it at the source exactly when `record_problem` says so, which is also
what the ingest response counted as `invalid`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_stages._connectors.sources.ingest import INVALID_JSON, SOURCE_REASON_PREFIX
from pipeline_stages._connectors.sources.records import record_problem, source_record
from tests.fuzz_values import DOCUMENTS, deep_text, dumps
from tests.integration.service_harness import InProcessService, in_process_service

pytestmark = [pytest.mark.spark, pytest.mark.slow]

INTO = {"connectionName": "local", "db": "fz", "coll": "out"}
PROCESSORS: dict[str, list[dict[str, Any]]] = {
    "fz_sample": [{"$source": {"connectionName": "fz"}}],
    "fz_merge": [{"$source": {"connectionName": "fz"}}, {"$merge": {"into": INTO}}],
    "fz_emit": [{"$source": {"connectionName": "fz"}}, {"$emit": {"connectionName": "files", "path": "fzout"}}],
    "fz_files": [
        {"$source": {"connectionName": "files", "path": "fzin"}},
        {"$merge": {"into": {**INTO, "coll": "files"}}},
    ],
}  # fmt: skip
HTTP_PROCESSORS = ("fz_sample", "fz_merge", "fz_emit")
#: Records ingested into `fz` so far (the merge processor's stats are cumulative).
INGESTED = [0]


def _dates() -> list[Any]:
    longs = ["99999999999999999999", "9223372036854775807", "-9223372036854775808",
             "-62135596800001", "253402300800000", "abc", "1.5", ""]  # fmt: skip
    return [
        *({"$numberLong": n} for n in longs),
        {"$numberLong": 5},
        "garbage",
        "",
        "+10000-01-01T00:00:00Z",
        "0000-12-31T23:59:59Z",
        "2024-13-45T00:00:00Z",
        "2024-01-01T00:00:00",
        1e30,
        -1e30,
        1.5,
        9223372036854775807,
        2**64,
        None,
        True,
        [],
        {},
    ]


def catalogue() -> list[bytes]:
    """The fixed records (one per line)."""
    docs: list[Any] = [{"t": {"$date": d}} for d in _dates()]
    docs += [{"t": {"$date": "2024-01-01T00:00:00Z", "extra": 1}}]
    docs += [{"n": {"$numberDecimal": v}} for v in ("garbage", "1e9999", "", "NaN", "1.5")]
    docs += [{"n": {"$numberDecimal": 1.5}}, {"n": {"$numberLong": "1" * 30}}, {"o": {"$oid": "x"}}]
    docs += [{"b": {"$binary": {"base64": "!!", "subType": "00"}}}]
    docs += [{"n": n} for n in (1e308, 5e-324, 2**63, -(2**63) - 1, 2**64, 10**40, -0.0)]
    docs += [{"s": s} for s in ("\ud800", "\udfff x", "\U0001f600", "a\x00b")]
    docs += [{"\ud800": 1}, {"_id": [1]}, {"_id": None}, {"": 1, "$where": 2, "a.b": 3}]
    lines = [dumps(d).encode("utf-8", "surrogatepass") for d in docs]
    lines += [json.dumps(d).encode() for d in docs[-8:-3]]  # escaped surrogates too
    lines += [b'{"n": NaN}', b'{"n": Infinity}', b'{"n": -Infinity}', b'{"n": 1e400}',
              b'{"n": -1E+0400}', b'{"n": 1e-400}', b'{"n": 1' + b"0" * 400 + b"}",
              b'{"a": 1, "a": 2}', b'{"a": 1} x', b'{"a": "\x01"}', b"[]", b'"x"', b"null",
              b"3", b'{"$date": "2024-01-01T00:00:00Z"}', b'{"k": "\xff"}', b'{"k": "\xc3"}',
              b"\xed\xa0\x80", b"\xef\xbb\xbf{}", b'{"a": 1}{"a": 2}', b'{"a": 1}}',
              b'{"a": 1}, {"a": 2}', b'{"a": 1.5} {"$date": "x"}']  # fmt: skip
    lines += [deep_text(d).encode() for d in (99, 100, 101, 999, 1000, 1001, 3000)]
    lines += [b'{"ok": ' + str(i).encode() + b"}" for i in range(3)]
    return lines


@pytest.fixture(scope="module")
def fz(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    del spark
    with in_process_service(tmp_path_factory.mktemp("fuzz")) as service:
        service.add_ingest("fz")
        (service.root / "fzin").mkdir()
        for name in HTTP_PROCESSORS:
            service.create_and_start(name, PROCESSORS[name])
        yield service


_SEQ = re.compile(r'"_stream_meta":\{"source":\{"connectionName":"fz","seq":(\d+)')
_LINE = re.compile(r'"_stream_meta":\{"source":\{"line":(\d+),"path":"fzin/')


def _position(value: Any, pattern: re.Pattern[str]) -> int:
    """The source position (HttpIngest seq, File line) of an output or DLQ record, or of
    a document's text (a `docText`, an emitted line)."""
    if isinstance(value, str):
        found = pattern.search(value)
        assert found is not None, value[:200]
        return int(found.group(1))
    meta = value["_stream_meta"]
    source = (json.loads(meta) if isinstance(meta, str) else meta)["source"]
    return int(source["line"] if "line" in source else source["seq"])


def _dlq(fz: InProcessService, name: str, pattern: re.Pattern[str]) -> dict[int, dict[str, Any]]:
    """The processor's DLQ records by source position (each position at most once)."""
    found: dict[int, dict[str, Any]] = {}
    for record in fz.dlq(name):
        assert record["errInfo"]["reason"], record
        meta = record.get("_stream_meta")
        if meta and meta != "{}":
            key = _position(record, pattern)
        else:  # a sink's record of a document kept as text
            key = _position(record["docText"], pattern)
        assert key not in found, f"{key} is in the DLQ of {name} twice"
        found[key] = record
    return found


def _split(
    fz: InProcessService, name: str, new: set[int], pattern: re.Pattern[str]
) -> tuple[set[int], dict[int, str]]:
    """`(written, {position: DLQ reason})` of the `new` positions in a sink processor, checked
    to cover every position exactly once."""
    if name == "fz_emit":
        written = {_position(line, pattern) for line in fz.emitted_lines("fzout")}
    else:
        coll = "files" if name == "fz_files" else "out"
        written = {_position(d, pattern) for d in fz.collection("fz", coll)}
    dead = {k: r["errInfo"]["reason"] for k, r in _dlq(fz, name, pattern).items() if k in new}
    written &= new
    assert written | set(dead) == new, sorted(new - written - set(dead))
    assert not written & set(dead)
    return written, dead


def _check_batch(fz: InProcessService, lines: list[bytes]) -> None:
    lines = [b'{"first": 1}', *lines]  # a leading BOM would be the body's, not a record's
    cursors = {name: fz.sample_cursor(name) for name in HTTP_PROCESSORS}
    accepted = fz.ingest("fz", b"\n".join(lines) + b"\n")
    records = dict(zip(range(accepted["firstSeq"], accepted["lastSeq"] + 1), lines, strict=True))
    new = set(records)
    for name in HTTP_PROCESSORS:
        fz.drain(name)
        fz.assert_running(name)
    problems = {seq: record_problem(raw) for seq, raw in records.items()}
    refused = {seq for seq, problem in problems.items() if problem is not None}
    assert accepted["invalid"] == len(refused)
    # The sample-only processor: its sample shows each record once, as an output or as a
    # DLQ message; the DLQ holds exactly what the source refuses, with the source's reason.
    messages = fz.sample_after("fz_sample", cursors["fz_sample"])
    assert len(messages) == len(records)
    dead = {k: r for k, r in _dlq(fz, "fz_sample", _SEQ).items() if k in new}
    assert set(dead) == refused
    assert sum("_dlqMessage" in m for m in messages) == len(refused)
    for seq in refused:
        flagged = source_record(records[seq])[1]
        expected = SOURCE_REASON_PREFIX + flagged if flagged else INVALID_JSON
        assert dead[seq]["errInfo"]["reason"] == expected, (records[seq][:80], dead[seq])
        assert dead[seq]["operatorName"] == "SourceOperator"
    # The sinks: each record written or in the DLQ, exactly once; the source's refusals the
    # same in every processor.
    for name in ("fz_merge", "fz_emit"):
        written, sink_dead = _split(fz, name, new, _SEQ)
        assert refused <= set(sink_dead)
    # Stats count only what the sink wrote, and every record is counted once.
    INGESTED[0] += len(records)
    stats = fz.stats("fz_merge")
    assert stats["dlqMessageCount"] == len(fz.dlq("fz_merge"))
    assert stats["outputMessageCount"] + stats["dlqMessageCount"] == INGESTED[0]


def test_the_catalogue_through_http_ingest(fz: InProcessService) -> None:
    _check_batch(fz, catalogue())


def test_a_16_mb_document_is_delivered(fz: InProcessService) -> None:
    big = b'{"big": "' + b"x" * (16 * 1024 * 1024 - 100) + b'"}'
    _check_batch(fz, [big, b'{"after": 1}'])
    assert any(d.get("after") == 1 for d in fz.collection("fz", "out"))


RAW = st.one_of(
    DOCUMENTS.map(lambda d: dumps(d).encode("utf-8", "surrogatepass")),
    DOCUMENTS.map(lambda d: json.dumps(d, allow_nan=True).encode()),
    st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b and b.strip()),
    st.tuples(DOCUMENTS, st.binary(min_size=1, max_size=2)).map(
        lambda t: json.dumps(t[0]).encode()[:-1] + t[1].replace(b"\n", b"") + b"}"
    ),
)


@settings(
    max_examples=3,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(RAW, min_size=10, max_size=25))
def test_random_records_through_http_ingest(fz: InProcessService, lines: list[bytes]) -> None:
    _check_batch(fz, [line.replace(b"\n", b" ").replace(b"\r", b" ") for line in lines])


def test_the_catalogue_through_the_file_source(fz: InProcessService) -> None:
    lines = catalogue()
    big = b'"' + b"y" * (17 * 1024 * 1024) + b'"'  # past the HTTP limit
    lines.append(b'{"big": ' + big + b"}")
    lines.append(b'{"t": {"$date": "garbage"}, "big": ' + big + b"}")  # 17 MB into the DLQ
    (fz.root / "fzin" / "0001.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    fz.stop(*HTTP_PROCESSORS)
    fz.create_and_start("fz_files", PROCESSORS["fz_files"])
    fz.drain("fz_files")
    fz.assert_running("fz_files")
    new = {i + 1 for i, line in enumerate(lines) if line.strip()}
    _, dead = _split(fz, "fz_files", new, _LINE)
    for line, reason in dead.items():
        problem = record_problem(lines[line - 1])
        if problem is not None:
            assert reason.startswith(SOURCE_REASON_PREFIX), reason
        else:
            assert "MergeOperator" in reason, reason
