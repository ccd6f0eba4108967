"""What sources flag before Spark parses a record, and the whole verdict on a record
(`sources.records`), without Spark; the end-to-end behaviour is in
`tests/integration/test_poison_documents.py` and `tests/integration/test_poison_fuzz.py`."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_stages._connectors.sources.arrow_records import raw_rows
from pipeline_stages._connectors.sources.files import FilePosition, FileStreamReader
from pipeline_stages._connectors.sources.http_ingest import (
    HttpIngestStreamReader,
    _Range,
    encode_record,
)
from pipeline_stages._connectors.sources.kafka import KafkaRange, KafkaStreamReader, rows_batch
from pipeline_stages._connectors.sources.kafka_plan import _native_to_raw
from pipeline_stages._connectors.sources.records import (
    binary_json,
    record_problem,
    source_record,
)
from pipeline_stages._connectors.sources.spool import Spool

INVALID_UTF8 = [b'{"k": "\xff"}', b'{"k": "\xc3"}', b'{"k": "caf\xe9"}', b"\xed\xa0\x80"]


@pytest.mark.parametrize("raw", INVALID_UTF8)
def test_bytes_that_are_not_utf8_become_their_binary_value_with_a_reason(raw: bytes) -> None:
    text, error = source_record(raw)
    assert error is not None and error.startswith("input is not valid UTF-8 (byte 0x")
    assert text is not None
    assert json.loads(text) == {
        "$binary": {"base64": base64.b64encode(raw).decode(), "subType": "00"}
    }
    assert record_problem(raw) == error


def test_valid_utf8_text_is_unchanged_but_for_doubles() -> None:
    assert source_record('{"k": "café", "x": 1.5}'.encode()) == ('{"k": "café", "x": 1.5e0}', None)
    assert source_record(None) == (None, None)


INVALID_WRAPPERS: list[tuple[Any, str]] = [
    ({"$date": "garbage"}, '$date "garbage" is not an ISO-8601 date'),
    ({"$date": 1e30}, "$date 1e+30 is outside the years 1 to 9999"),
    ({"$date": 1.5}, "$date 1.5 is not a whole number of milliseconds"),
    ({"$date": True}, "$date takes an ISO-8601 string"),
    ({"$date": {"$numberLong": "99999999999999999999"}}, "is not a 64-bit integer number"),
    ({"$date": {"$numberLong": "9223372036854775807"}}, "is outside the years 1 to 9999"),
    ({"$date": {"$numberLong": "-62135596800001"}}, "is outside the years 1 to 9999"),
    ({"$date": {"$numberLong": 5}}, "is not a 64-bit integer number"),
    ({"$date": "9999-12-31T23:00:00-05:00"}, "is outside the years 1 to 9999"),
    ({"$date": "2024-01-01T00:00:00Z", "x": 1}, "$date takes no other fields, got x"),
    ({"$oid": "xyz"}, "$oid takes 24 hexadecimal digits"),
    ({"$oid": 12}, "$oid takes 24 hexadecimal digits"),
    ({"$numberDecimal": "garbage"}, '$numberDecimal "garbage" is not a decimal number'),
    ({"$numberDecimal": "1e9999"}, "outside the range of a 128-bit decimal"),
    ({"$numberDecimal": 1.5}, "$numberDecimal takes a string"),
    ({"$numberLong": "1.5"}, "is not an integer"),
    ({"$numberLong": "9223372036854775808"}, "outside the 64-bit range"),
    ({"$numberInt": "2147483648"}, "outside the 32-bit range"),
    ({"$numberDouble": "one"}, "$numberDouble takes a number as a string"),
    ({"$binary": {"base64": "!!", "subType": "00"}}, "is not base64"),
    ({"$binary": {"base64": "", "subType": "zz"}}, "is not one or two hexadecimal digits"),
    ({"$binary": "AAAA"}, "$binary takes"),
]


@pytest.mark.parametrize(("value", "problem"), INVALID_WRAPPERS)
def test_invalid_extended_json_is_flagged_with_its_path_and_what_is_wrong(
    value: Any, problem: str
) -> None:
    raw = json.dumps({"a": [1, {"b~/": value}]}).encode()
    _, error = source_record(raw)
    assert error is not None and error.startswith("invalid Extended JSON at /a/1/b~0~1: ")
    assert problem in error
    assert record_problem(raw) == error


VALID_WRAPPERS: list[Any] = [
    {"$date": "2024-01-01T00:00:00Z"},
    {"$date": "2024-01-01T00:00:00"},  # read in UTC, as Spark reads it
    {"$date": "0001-01-01T00:00:00Z"},
    {"$date": "9999-12-31T23:59:59.999Z"},
    {"$date": {"$numberLong": "-62135596800000"}},
    {"$date": {"$numberLong": "253402300799999"}},
    {"$date": 1_700_000_000_000},
    {"$oid": "0123456789abcdefABCDEF01"},
    {"$numberDecimal": "NaN"},
    {"$numberDecimal": "-1.5E+6144"},
    {"$numberLong": "-9223372036854775808"},
    {"$numberInt": "-2147483648"},
    {"$numberDouble": "-Infinity"},
    {"$binary": {"base64": "AAE=", "subType": "04"}},
    {"$binary": "AAE=", "$type": "00"},
    {"$regularExpression": {"pattern": "x", "options": ""}},  # a plain object to Sluice
    {"$ref": "c", "$id": {"$oid": "0123456789abcdef01234567"}},
]


@pytest.mark.parametrize("value", VALID_WRAPPERS)
def test_valid_extended_json_passes(value: Any) -> None:
    raw = json.dumps({"a": value}).encode()
    assert source_record(raw)[1] is None
    assert record_problem(raw) is None


def test_what_spark_would_misread_is_flagged() -> None:
    for raw, error in [
        (b'{"a": 1e400}', "number 1e400 is beyond the range of a double"),
        (b'{"a": -1E+0400}', "number -1E+0400 is beyond the range of a double"),
        (b'{"a": 1} x', "input is not a valid JSON object"),
    ]:
        assert source_record(raw)[1] == error
        assert record_problem(raw) == error
    for fine in (b'{"a": 1e300, "b": "1e400"}', b'{"a": 1e-400}', b'  {"a": 1}  \r'):
        assert source_record(fine)[1] is None and record_problem(fine) is None


# Spark's parser reads a text's first JSON value and ignores what follows it: each of these
# would reach the pipeline as `{"a": 1}`, the rest lost, unless the source flags it.
TEXT_AFTER_THE_OBJECT = [b'{"a": 1}{"a": 2}', b'{"a": 1} {"a": 2}', b'{"a": 1}}', b'{"a": 1},{"a": 2}',
                         b'{"a": 1}]', b'{"a": {"b": 1}}}', '{"a": 1}\u00a0'.encode(), b'{"a": 1}x}',
                         b'{"a": 1} {"$date": "x"}', b'{"a": 1.5}{"a": 2}', b'{"a": 1}\n{"a": 2}']  # fmt: skip


@pytest.mark.parametrize("raw", TEXT_AFTER_THE_OBJECT)
def test_text_after_the_object_sends_the_record_to_the_dlq(raw: bytes) -> None:
    assert source_record(raw)[1] == "input is not a valid JSON object"
    assert record_problem(raw) == "input is not a valid JSON object"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"s": "}{"}',
        b'{"s": "\\"}{"}',
        b'{"a": [1, {"b": [2, {}]}]}',
        b' \t{"a": 1} \r\n',
        b'{"a":' + b"[" * 40 + b"]" * 40 + b"}",
    ],  # fmt: skip
)
def test_one_object_with_brackets_in_strings_or_deep_is_no_problem(raw: bytes) -> None:
    assert source_record(raw)[1] is None and record_problem(raw) is None


def test_the_verdict_includes_what_sparks_parser_refuses() -> None:
    deep_ok = b'{"a":' + b"[" * 999 + b"]" * 999 + b"}"
    deep_bad = b'{"a":' + b"[" * 1000 + b"]" * 1000 + b"}"
    for raw in (b'{"a": NaN}', b'{"a": -Infinity}', b'{"a": 1, "a": 2}', b'{"a": "\\ud800"}',
                b'{"\\udc00": 1}', b"[1]", b"3", b'"x"', b"", b"not json", b'{"a": "\x01"}',
                b'{"$date": "2024-01-01T00:00:00Z"}', deep_bad):  # fmt: skip
        assert record_problem(raw) is not None, raw[:40]
        assert source_record(raw)[1] is None, raw[:40]  # Spark refuses these on its own
    assert "nests 1001 levels; at most 1000 are read" in str(record_problem(deep_bad))
    wrapper_and_more = b'{"$oid": null, "x": 1}'
    assert source_record(wrapper_and_more)[1] == (
        "invalid Extended JSON at /: $oid takes no other fields, got x"
    )
    assert record_problem(deep_ok) is None
    assert record_problem(b'{"a": "\\ud83d\\ude00", "b": 1}') is None


def test_http_ingest_and_file_readers_hand_the_reason_to_spark(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    raws = [b'{"k": 1}', b'{"k": "\xff"}']
    spool.append("c", [encode_record(raw, 1_000) for raw in raws])
    reader = HttpIngestStreamReader({"datadir": str(tmp_path), "connection": "c"})
    rows = raw_rows(reader.read(_Range(1, 2)))
    assert [(row[2], row[5]) for row in rows] == [
        ('{"k": 1}', None),
        (binary_json(raws[1]), "input is not valid UTF-8 (byte 0xff at offset 7)"),
    ]
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.jsonl").write_bytes(b"\n".join(raws) + b"\n")
    files = FileStreamReader({"directory": str(tmp_path / "files")})
    end = FilePosition("a.jsonl", 2, 2, 5)
    partition = files.partitions(FilePosition().to_offset(), end.to_offset())[0]
    assert [(row[2], row[5]) for row in raw_rows(files.read(partition))] == [
        (r[2], r[5]) for r in rows
    ]


class _Message:
    def __init__(self, value: bytes | None, offset: int) -> None:
        self._value, self._offset = value, offset

    def value(self) -> bytes | None:
        return self._value

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_000

    def key(self) -> None:
        return None

    def headers(self) -> None:
        return None


def test_kafka_values_that_are_not_utf8_go_to_the_dlq_with_their_bytes() -> None:
    reader = KafkaStreamReader({"clientconfigsecret": "{}", "topics": '["t"]'})
    columns: list[list[Any]] = [[], [], [], [], [], []]
    for offset, value in enumerate([b'{"k": 1}', b'{"k": "\xff"}', None]):
        reader._append(columns, KafkaRange("t", 0, 0, 0, 3), _Message(value, offset))
    rows = [list(column) for column in zip(*raw_rows([rows_batch(columns)]), strict=True)]
    assert rows[2] == ['{"k": 1}', binary_json(b'{"k": "\xff"}'), None]
    assert rows[5] == [None, "input is not valid UTF-8 (byte 0xff at offset 7)", None]
    # Spark's own Kafka format goes through the same conversion.
    batch = pa.RecordBatch.from_pydict(
        {
            "topic": ["t", "t"],
            "partition": [0, 0],
            "offset": [0, 1],
            "value": [b'{"k": 1}', b'{"k": "\xff"}'],
            "timestamp": pa.array([0, 0], pa.timestamp("us", tz="UTC")),
            "key": [None, None],
            "headers": [None, None],
        }
    )
    (converted,) = list(_native_to_raw(["t"], "binData", "dlq")(iter([batch])))
    assert converted.column("raw").to_pylist() == rows[2][:2]
    assert converted.column("error").to_pylist() == rows[5][:2]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_checking_a_record_never_raises_and_the_verdict_covers_the_source(raw: bytes) -> None:
    text, error = source_record(raw)
    verdict = record_problem(raw)
    if error is not None:
        assert verdict == error
    assert text is not None


JSON_LEAVES = (
    st.none()
    | st.sampled_from(["\ud800", "\udfff x"])
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from([v for v, _ in INVALID_WRAPPERS] + VALID_WRAPPERS)
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=5), JSON_VALUES, max_size=5))
def test_a_document_is_flagged_exactly_when_it_holds_an_invalid_wrapper(
    doc: dict[str, Any],
) -> None:
    from pipeline_stages._documents.ejson import invalid_wrapper

    raw = json.dumps(doc).encode()
    _, error = source_record(raw)
    (error or "").encode("utf-8")  # what Spark takes: a lone surrogate once failed the query
    found = invalid_wrapper(doc)
    if found is None:
        assert error is None or "beyond the range of a double" in error
    else:
        assert error == f"invalid Extended JSON at {found[0]}: {found[1]}"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": {"\\u0024oid": 1}}',
        b'{"t": {"$date": "2024-01-01T00:00:00Z"}, "o": {"\\u0024oid": 1}}',
    ],
)
def test_a_dollar_written_as_an_escape_is_read_as_spark_reads_it(raw: bytes) -> None:
    # Spark decodes the escape: `{"\u0024oid": 1}` is an `$oid` wrapper to it, and an invalid one.
    assert (
        source_record(raw)[1]
        == "invalid Extended JSON at /"
        + ("a" if raw.startswith(b'{"a"') else "o")
        + ": $oid takes 24 hexadecimal digits, got 1"
    )
