"""One document's content never stops a processor: it goes to the DLQ with a reason, and the
rest of its micro-batch is delivered (the real service in process: routes, manager, Spark
engine, writers, SQLite stores; see `service_harness`).

Failures of the system (a store that cannot be reached) still fail a batch; those are the
supervisor's business (`tests/unit/service/manager`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from pipeline_stages._stream.envelope import UNREADABLE_RESULT
from tests.fuzz_values import deep_text
from tests.integration.service_harness import InProcessService, in_process_service

pytestmark = pytest.mark.spark

SOURCE_ERROR = "Failed to process input document with error: "
NOT_UTF8 = "input is not valid UTF-8 (byte "


@pytest.fixture(scope="module")
def svc(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessService]:
    del spark  # the engine runs on the test run's session
    with in_process_service(tmp_path_factory.mktemp("poison")) as service:
        yield service


def ndjson(*docs: Any) -> bytes:
    return b"".join((d if isinstance(d, bytes) else json.dumps(d).encode()) + b"\n" for d in docs)


def document(record: dict[str, Any]) -> Any:
    """A DLQ record's document (`docText` holds one too deep for a record, as text)."""
    return record["doc"] if "doc" in record else json.loads(record["docText"])


def reasons_by(records: list[dict[str, Any]], field: str = "i") -> dict[Any, str]:
    return {document(r)[field]: r["errInfo"]["reason"] for r in records}


def test_a_poison_date_goes_to_the_dlq_and_the_rest_of_the_batch_is_delivered(
    svc: InProcessService,
) -> None:
    svc.add_ingest("poison")
    svc.create_and_start("dates", [{"$source": {"connectionName": "poison", "timeField": "$t"}}])
    accepted = svc.ingest(
        "poison",
        ndjson(
            {"i": 1, "t": {"$date": "2024-01-01T00:00:00Z"}},
            {"i": 2, "t": {"$date": {"$numberLong": "99999999999999999999"}}},
            # In the 64-bit range, beyond Spark's: `timestamp_millis` failed the whole query.
            {"i": 3, "t": {"$date": {"$numberLong": "9223372036854775807"}}},
            {"i": 4, "t": {"$date": 1e30}},
            {"i": 5, "t": {"$date": "garbage"}},
            {"i": 6, "t": "2024-01-01T00:00:00Z"},  # a string is no date (Atlas's rule too)
            {"i": 7, "t": {"$date": "2024-01-01T00:00:01Z"}},
        ),
    )
    assert accepted["invalid"] == 4  # what the source refuses; `i: 6` fails at timeField
    svc.drain("dates")
    svc.assert_running("dates")
    assert [m["i"] for m in svc.outputs("dates")] == [1, 7]
    # Spark's UI and log name the query after its processor (and its id, to keep it unique).
    assert svc.run("dates").handle.query_name == f"dates ({svc.manager.get('dates').id})"
    assert reasons_by(svc.dlq("dates")) == {
        2: SOURCE_ERROR + 'invalid Extended JSON at /t: $date {"$numberLong": '
        '"99999999999999999999"} is not a 64-bit integer number of milliseconds',
        3: SOURCE_ERROR + 'invalid Extended JSON at /t: $date {"$numberLong": '
        '"9223372036854775807"} is outside the years 1 to 9999',
        4: SOURCE_ERROR + "invalid Extended JSON at /t: $date 1e+30 is outside the years 1 to 9999",
        5: SOURCE_ERROR + 'invalid Extended JSON at /t: $date "garbage" is not an ISO-8601 date',
        6: "timeField must evaluate to a date, got string",
    }
    # Starting again resumes from the checkpoint and goes on.
    assert svc.client.post("/api/v1/processors/dates:stop").status_code == 200
    assert svc.client.post("/api/v1/processors/dates:start").status_code == 200
    svc.ingest("poison", ndjson({"i": 8, "t": {"$date": "2024-01-01T00:00:02Z"}}))
    svc.drain("dates")
    svc.assert_running("dates")
    assert [m["i"] for m in svc.outputs("dates")][-1] == 8
    svc.stop("dates")


def test_an_invalid_date_made_by_the_pipeline_names_what_is_wrong(svc: InProcessService) -> None:
    svc.add_ingest("made")
    pipeline = [
        {"$source": {"connectionName": "made"}},
        {"$addFields": {"d": {"$toDate": {"$toDouble": "$n"}}}},
        {
            "$addFields": {
                "later": {"$dateAdd": {"startDate": "$d", "unit": "year", "amount": "$years"}}
            }
        },
    ]
    svc.create_and_start("made_dates", pipeline)
    svc.ingest(
        "made",
        ndjson(
            {"i": 1, "n": 0, "years": 1},
            {"i": 2, "n": 9_000_000_000_000_000, "years": 1},  # failed the query
            {"i": 3, "n": 0, "years": 9000},  # beyond the year 9999
            {"i": 4, "n": 86_400_000, "years": 2},
        ),
    )
    svc.drain("made_dates")
    svc.assert_running("made_dates")
    assert [(m["i"], m["later"]) for m in svc.outputs("made_dates")] == [
        (1, {"$date": "1971-01-01T00:00:00.000Z"}),
        (4, {"$date": "1972-01-02T00:00:00.000Z"}),
    ]
    reasons = reasons_by(svc.dlq("made_dates"))
    assert reasons[2].endswith("date overflow: the date is outside the years 1 to 9999")
    assert reasons[3].endswith("$dateAdd overflowed")
    svc.stop("made_dates")


def test_merge_into_local_writes_the_good_documents_and_dead_letters_the_rest(
    svc: InProcessService,
) -> None:
    svc.add_ingest("merge_in")
    into = {"connectionName": "local", "db": "app", "coll": "$c"}
    svc.create_and_start(
        "merge", [{"$source": {"connectionName": "merge_in"}}, {"$merge": {"into": into}}]
    )
    deep: Any = 0
    for _ in range(150):
        deep = [deep]
    svc.ingest(
        "merge_in",
        ndjson(
            {"i": 1, "c": "good"},
            {"i": 2, "c": "good", "d": {"$date": {"$numberLong": "99999999999999999999"}}},
            {"i": 3, "c": "a/../b"},
            {"i": 4, "c": "good", "deep": deep},
            {"i": 5, "c": "good", "d": {"$date": {"$numberLong": "-62135596800001"}}},
            {"i": 6, "c": "good", "n": {"$numberDecimal": "garbage"}},
            b'{"i": 7, "c": "good", "big": 1e400}',
            {"i": 8, "c": "good"},
            {"i": 9, "c": "good", "n": 18446744073709551616},
        ),
    )
    svc.drain("merge")
    svc.assert_running("merge")
    assert sorted(d["i"] for d in svc.collection("app", "good")) == [1, 8]
    assert svc.collection("app", "a/../b") == []
    reasons = reasons_by(svc.dlq("merge"))
    assert sorted(reasons) == [2, 3, 4, 5, 6, 7, 9]
    (too_deep,) = [r for r in svc.dlq("merge") if "doc" not in r]
    assert json.loads(too_deep["docText"])["deep"] == deep  # kept whole, as text
    assert reasons[3] == (
        "Failed to process input document in MergeOperator with error: invalid collection "
        "name 'a/../b': it holds '/' (no $ / \\ or NUL allowed)"
    )
    assert reasons[4] == (
        "Failed to process input document in MergeOperator with error: the document nests "
        "151 levels; a collection holds documents of at most 100 (MongoDB's limit)"
    )
    assert reasons[5].endswith("is outside the years 1 to 9999")
    assert reasons[6].endswith('$numberDecimal "garbage" is not a decimal number')
    assert reasons[7] == SOURCE_ERROR + "number 1e400 is beyond the range of a double"
    assert reasons[9] == (
        "Failed to process input document in MergeOperator with error: the integer at /n does "
        "not fit in 64 bits, the largest integer a collection holds"
    )
    stats = svc.stats("merge")
    assert stats["outputMessageCount"] == 2  # only what was written
    assert stats["dlqMessageCount"] == 7
    svc.stop("merge")


def test_invalid_utf8_goes_to_the_dlq_with_its_bytes_from_every_source(
    svc: InProcessService,
) -> None:
    bad = [b'{"k": "\xff\xfe\xfd"}', b'{"k": "\xc3"}', b'{"k": "caf\xe9"}']
    good = b'{"k": "caf\xc3\xa9"}'
    svc.add_ingest("bytes_in")
    svc.create_and_start("bytes_http", [{"$source": {"connectionName": "bytes_in"}}])
    (svc.root / "utf8").mkdir()
    svc.create_and_start("bytes_file", [{"$source": {"connectionName": "files", "path": "utf8"}}])
    body = b"\n".join([good, *bad, good]) + b"\n"
    assert svc.ingest("bytes_in", body)["invalid"] == 3
    (svc.root / "utf8" / "0001.jsonl").write_bytes(body)
    for name in ("bytes_http", "bytes_file"):
        svc.drain(name)
        svc.assert_running(name)
        assert [m["k"] for m in svc.outputs(name)] == ["café", "café"]
        found = sorted(
            (r["doc"]["$binary"]["base64"], r["errInfo"]["reason"]) for r in svc.dlq(name)
        )
        assert all(r["doc"]["$binary"]["subType"] == "00" for r in svc.dlq(name))
        assert found == sorted(
            [
                (base64.b64encode(bad[0]).decode(), SOURCE_ERROR + NOT_UTF8 + "0xff at offset 7)"),
                (base64.b64encode(bad[1]).decode(), SOURCE_ERROR + NOT_UTF8 + "0xc3 at offset 7)"),
                (base64.b64encode(bad[2]).decode(), SOURCE_ERROR + NOT_UTF8 + "0xe9 at offset 10)"),
            ]
        )


def test_deep_documents_in_a_window_never_stop_the_query(svc: InProcessService) -> None:
    svc.add_ingest("windowed")
    window = {
        "interval": {"size": 1, "unit": "second"},
        "pipeline": [{"$group": {"_id": None, "docs": {"$push": "$$ROOT"}, "n": {"$count": {}}}}],
    }
    pipeline = [
        {"$source": {"connectionName": "windowed", "timeField": "$t"}},
        {"$tumblingWindow": window},
    ]
    svc.create_and_start("deep_window", pipeline)

    def at(second: int, x: str) -> bytes:
        return b'{"t": {"$date": "2024-01-01T00:00:%02d.000Z"}, "x": %s}' % (second, x.encode())

    # Decoding the 600-level document for `$push` overflowed Python's recursion limit and
    # failed the query; the result holding the 999-level one nests past what Spark reads.
    # One micro-batch each: a batch closes the windows the previous ones' watermark passed.
    # (Windows close once the watermark passes their end and the allowed lateness.)
    batches = [[at(1, "1"), at(1, deep_text(600)), at(1, deep_text(999))], [at(2, '"a"')],
               [at(3, deep_text(600))], [at(30, '"b"')], [at(59, '"c"')]]  # fmt: skip
    for batch in batches:
        svc.ingest("windowed", ndjson(*batch))
        svc.drain("deep_window")
    svc.assert_running("deep_window")
    first, second = svc.outputs("deep_window")[:2]
    assert (first["n"], first["_stream_meta"]["window"]["start"]) == (
        1,
        {"$date": "2024-01-01T00:00:02.000Z"},
    )
    # The [3 s, 4 s) window holds the 600-level document: the sample shows a note for it.
    assert second == {"_sluiceNote": "message nested deeper than 200 levels"}
    assert svc.stats("deep_window")["outputMessageCount"] >= 2
    (record,) = svc.dlq("deep_window")
    assert record["errInfo"]["reason"] == UNREADABLE_RESULT
    assert isinstance(record["doc"], str) and record["doc"].startswith('{"_id":null')
    svc.stop("deep_window")
