"""Sources in bulk without Spark: the Arrow checks give `source_record`'s verdict, a batch cut
over tasks reads the rows one reader would, and a cut Kafka range keeps its partition.

The same in Spark (tasks, replays, a Kafka backlog) is in `tests/integration/test_bulk_sources.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.streaming.datasource import ReadAllAvailable

from pipeline_stages._connectors.sources import arrow_records, file_ranges, spool_read
from pipeline_stages._connectors.sources import kafka_offsets as K
from pipeline_stages._connectors.sources.arrow_records import checked, raw_rows
from pipeline_stages._connectors.sources.file_ranges import LineIndex, plan_tasks, split_lines
from pipeline_stages._connectors.sources.files import FileStreamReader
from pipeline_stages._connectors.sources.http_ingest import HttpIngestStreamReader, encode_record
from pipeline_stages._connectors.sources.records import source_record
from pipeline_stages._connectors.sources.spool import Spool
from pipeline_stages._connectors.sources.spool_read import Position, SpoolIndex, read_payloads

#: Characters that make the checks and the decimal rewrite take every branch.
JSONISH = st.text(alphabet=st.sampled_from(list('{}[]"\\:,.-+eE $0159 \t\r\nxé١\x00')), max_size=30)


def verdicts(payloads: list[bytes | None]) -> list[tuple[str | None, str | None]]:
    raw, error = checked(pa.array(payloads, pa.binary()))
    return list(zip(raw.to_pylist(), error.to_pylist(), strict=True))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JSONISH.map(lambda t: ("{" + t + "}").encode()) | st.binary(max_size=20)))
def test_the_arrow_checks_give_source_records_verdict(payloads: list[bytes]) -> None:
    assert verdicts(list(payloads)) == [source_record(p) for p in payloads]


#: Texts built from what decides where a fraction is rewritten: digits, dots, exponents,
#: quotes, escapes (a backslash before a newline too), value ends and other followers.
REWRITE_TEXT = st.text(alphabet=st.sampled_from(list('"\\01.5eE,}] \n\t:xZ{[-')), max_size=40)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(REWRITE_TEXT, min_size=1, max_size=6))
def test_the_numbers_only_rewrite_equals_the_rewrite_that_skips_strings(texts: list[str]) -> None:
    # Every text, valid JSON or not: the short way must insert `e0` where the full regex does.
    text = pa.array(texts, pa.string())
    assert arrow_records._rewrite_decimals(text).to_pylist() == (
        arrow_records._rewrite_around_strings(text).to_pylist()
    )


def test_timestamped_records_take_the_numbers_only_rewrite() -> None:
    # A date's fraction of a second sits in a string; only value ends make a record risky.
    around = arrow_records._NOT_BY_NUMBERS_ALONE
    safe = '{"ts":{"$date":"2024-01-01T00:00:20.000Z"},"v":94.79,"s":"v1.2.3","p":"0.5"}'
    risky = ['{"s":"1.5, 2"}', '{"s":"x 1.5}', '{"v":1.5x}', '{"s":"\\\n 1.5x"}']
    found = pa.compute.match_substring_regex(pa.array([safe, *risky]), around).to_pylist()
    assert found == [False, True, True, True, True]


#: `$date` strings: ISO-8601-shaped ones the date regex takes, valid or not, and others.
DATE_TEXT = st.one_of(
    st.datetimes().map(lambda d: d.isoformat()),
    st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.]{1,12}(Z|[+-][0-9:]{1,6})?)?", fullmatch=True
    ),
    st.text(alphabet="0123456789-:.TZ+ x", max_size=25),
    # The common shape, checked in bulk: every month's last days, leap years, year 0.
    st.from_regex(
        r"(0000|1900|2000|2023|2024|[0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|2[89]|3[01])"
        r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,7})?Z",
        fullmatch=True,
    ),
)
#: Records holding date wrappers among other fields, with JSON whitespace and `$` elsewhere.
DATE_RECORD = st.builds(
    lambda before, space, date, after: (
        "{" + before + '"t":{' + space + '"$date"' + space + ":" + space
        + '"' + date + '"' + space + "}" + after + "}"
    ),
    st.sampled_from(["", '"a": 1, ', '"$k": 1, ', '"s": "$5", ', '"d": {"$date": "x"}, ']),
    st.sampled_from(["", " ", "\t\n"]),
    DATE_TEXT,
    st.sampled_from(["", ', "b": 2.5', ', "c": {"$oid": "zz"}', ', "t": {"$date": "2024-01-01"}']),
)  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(DATE_RECORD.map(str.encode), min_size=1, max_size=8))
def test_records_with_date_wrappers_get_source_records_verdict(payloads: list[bytes]) -> None:
    # The one-date fast path must give what parsing the record gives, valid date or not.
    assert verdicts(list(payloads)) == [source_record(p) for p in payloads]


def test_common_dates_checked_in_bulk_agree_with_each_one_parsed() -> None:
    dates = [
        f"{year}-{month:02d}-{day:02d}T23:59:59{fraction}Z"
        for year in ("0000", "0001", "1900", "2000", "2023", "2024", "9999")
        for month in range(1, 13)
        for day in (28, 29, 30, 31)
        for fraction in ("", ".1", ".123456", ".1234567")
    ]
    payloads = [('{"t": {"$date": "' + date + '"}}').encode() for date in dates]
    found = verdicts(list(payloads))
    assert found == [source_record(p) for p in payloads]
    assert [error is None for _, error in found] == [
        date[:4] != "0000" and _a_day(date) for date in dates
    ]


def _a_day(date: str) -> bool:
    year, month, day = int(date[:4]), int(date[5:7]), int(date[8:10])
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return day <= [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]


def test_a_valid_date_wrapper_is_no_problem_and_an_invalid_one_names_itself() -> None:
    cases: list[bytes | None] = [
        b'{"t": {"$date": "2024-01-01T00:00:00.123Z"}, "v": 1}',
        b'{"t": {"$date": "2024-02-30T00:00:00Z"}}',
        b'{"t": { "$date" : "2024-01-01T00:00:00+01:00" }}',
        b'{"t": {"$date": "0000-01-01T00:00:00Z"}}',
    ]
    assert verdicts(cases) == [source_record(c) for c in cases]
    assert [error for _, error in verdicts(cases)] == [
        None,
        'invalid Extended JSON at /t: $date "2024-02-30T00:00:00Z" is not an ISO-8601 date',
        None,
        'invalid Extended JSON at /t: $date "0000-01-01T00:00:00Z" is not an ISO-8601 date',
    ]


def test_the_arrow_checks_on_known_cases() -> None:
    cases: list[bytes | None] = [
        b'{"a": 1.5, "b": [0.25, -2.5e3, 3.0E1], "s": "1.5"}',
        b'{"a": "x\\"1.5\\"", "b": 0.1}',
        b'{"a": 1.5"x"}',  # a fraction followed by a quote: the exact path
        '{"a": ١.٥, "b": 2.5}'.encode(),  # digits Python's regex knows, RE2's [0-9] not
        b'{"$date": "garbage"}',
        b'{"a": 1e400}',
        b'{"a": 1} x',
        b'{"a": 1}{"a": 2}',  # text after the object, ending in `}`: the exact path
        b'{"a": 1},{"a": 2.5}',
        b'{"s": "}{"}',  # brackets in a string: one object
        b'{"a": "\xff"}',  # not UTF-8: the whole array takes the exact path
        None,
        b"",
    ]
    assert verdicts(cases) == [source_record(c) for c in cases]
    assert verdicts(cases[:2])[0][0] == '{"a": 1.5e0, "b": [0.25e0, -2.5e3, 3.0E1], "s": "1.5"}'


def test_split_lines_is_bytes_split() -> None:
    for data in (b"", b"a", b"a\n", b"\n\n", b'{"x": 1}\n\n{"y": 2}'):
        assert split_lines(data).to_pylist() == data.split(b"\n")


def write_lines(path: Path, count: int, *, blank_every: int = 7) -> None:
    lines = ["" if n % blank_every == 3 else json.dumps({"n": n, "v": n / 4}) for n in range(count)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_plan_tasks_cuts_runs_of_about_equal_size_never_across_files() -> None:
    indexes = {
        "a": LineIndex.of(b"x\n" * 10),
        "b": LineIndex.of(b"yy\n" * 3),
        "c": LineIndex.of(b"z\n" * 30),
    }
    plan = plan_tasks([("a", 4, 10), ("b", 0, 3), ("c", 0, 21)], 100, indexes, tasks=3, min_rows=5)
    assert [[(r.name, r.first, r.count, r.seq_before) for r in runs] for runs in plan] == [
        [("a", 4, 6, 100), ("b", 0, 3, 106), ("c", 0, 1, 109)],
        [("c", 1, 10, 110)],
        [("c", 11, 10, 120)],
    ]
    assert plan[0][0].start == 8 and plan[0][0].end == 19  # bytes of lines 4..9, no newline
    # Too few lines for tasks of `min_rows`: one task.
    assert len(plan_tasks([("a", 0, 10)], 0, indexes, tasks=4, min_rows=6)) == 1


def file_reader(directory: Path, tasks: int) -> FileStreamReader:
    return FileStreamReader(
        {
            "directory": str(directory),
            "relative": "in",
            "parallelism": str(tasks),
            "minrowspertask": "50",
        }
    )


def test_a_file_batch_cut_over_tasks_reads_what_one_task_reads(tmp_path: Path) -> None:
    write_lines(tmp_path / "001.jsonl", 130)
    write_lines(tmp_path / "002.jsonl", 400)
    (tmp_path / "003.jsonl").write_text('{"last": 1}\n{"a": "\xff"', encoding="latin-1")
    (tmp_path / "004.jsonl").write_text("", encoding="utf-8")
    one, many = file_reader(tmp_path, 1), file_reader(tmp_path, 4)
    start = one.initialOffset()
    end = one.latestOffset(start, ReadAllAvailable())
    assert many.latestOffset(start, ReadAllAvailable())["seq"] == end["seq"] == 532
    single = one.partitions(start, end)
    cut = many.partitions(start, end)
    assert (len(single), len(cut)) == (1, 4)
    expected = raw_rows(one.read(single[0]))
    got = [row for task in cut for row in raw_rows(many.read(task))]
    assert got == expected
    assert [row[1] for row in got] == [n for n in range(1, 533) if not (n <= 530 and _blank(n))]
    assert got[-1][5] is not None and got[-1][5].startswith("input is not valid UTF-8")
    # A replay (a new reader on the same offsets, as after a restart) reads the same rows.
    again = file_reader(tmp_path, 4)
    assert [r for task in again.partitions(start, end) for r in raw_rows(again.read(task))] == got


def test_a_file_task_yields_its_lines_in_chunks_that_read_as_one_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks let Spark consume one batch while the next is checked; they must not change a
    # row: numbering, blank lines across a chunk's edge, the poison line's error.
    write_lines(tmp_path / "001.jsonl", 130)
    (tmp_path / "002.jsonl").write_text('{"last": 1}\n{"a": "\xff"', encoding="latin-1")
    reader = file_reader(tmp_path, 1)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    (task,) = reader.partitions(start, end)
    whole = list(reader.read(task))
    monkeypatch.setattr(file_ranges, "READ_CHUNK_LINES", 8)
    chunked = list(reader.read(task))
    assert len(whole) == 2  # one batch per file
    kept = sum(1 for n in range(130) if n % 7 != 3)  # `write_lines`' blank lines are skipped
    assert len(chunked) == -(-kept // 8) + 1
    assert max(batch.num_rows for batch in chunked) == 8
    assert raw_rows(chunked) == raw_rows(whole)


def _blank(seq: int) -> bool:
    """Whether the line with arrival sequence `seq` is one of `write_lines`' blank lines."""
    index = seq - 1 if seq <= 130 else seq - 131
    return index % 7 == 3


def test_an_http_batch_cut_over_tasks_reads_what_one_task_reads(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=4_000)  # many segments: ranges cross them
    for first in range(0, 600, 50):
        spool.append(
            "c",
            [
                encode_record(json.dumps({"i": i, "v": i / 8}).encode(), i)
                for i in range(first, first + 50)
            ],
        )
    spool.append("c", [encode_record(b'{"x": "\xff"}', 1), b"short"])

    def reader(tasks: int) -> HttpIngestStreamReader:
        options = {"datadir": str(tmp_path), "connection": "c"}
        return HttpIngestStreamReader(
            {**options, "parallelism": str(tasks), "minrowspertask": "40"}
        )

    one, many = reader(1), reader(5)
    expected = raw_rows(one.read(one.partitions({"seq": 0}, {"seq": 602})[0]))
    rows: list[tuple[Any, ...]] = []
    for lo, hi in ((0, 250), (250, 602)):  # the second batch resumes where the first ended
        tasks = many.partitions({"seq": lo}, {"seq": hi})
        assert len(tasks) == 5 and all(t.position is not None for t in tasks)
        rows += [row for task in tasks for row in raw_rows(many.read(task))]
    assert rows == expected
    assert [r[1] for r in rows] == list(range(1, 603))
    assert rows[-1][2:4] == ("short", 0)  # not written by encode_record: as decode_record reads it


@pytest.mark.parametrize("trusted", [True, False], ids=["positioned", "fallback"])
def test_an_http_task_yields_its_records_in_chunks_across_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trusted: bool
) -> None:
    spool = Spool(tmp_path, segment_bytes=300)  # a few records a segment: chunks cross them
    spool.append("c", [json.dumps({"i": i}).encode() for i in range(40)])
    # Record 1's position is not record 3's: the task falls back to `Spool.read`.
    position = SpoolIndex(spool, "c").locate([3], 38)[0] if trusted else Position(3, 1, 0)
    whole = [r for chunk in read_payloads(spool, "c", 3, 38, position) for r in chunk]
    monkeypatch.setattr(spool_read, "READ_CHUNK_RECORDS", 7)
    chunks = list(read_payloads(spool, "c", 3, 38, position))
    assert [len(chunk) for chunk in chunks] == [7, 7, 7, 7, 7, 1]
    assert [r for chunk in chunks for r in chunk] == whole
    assert [seq for seq, _ in whole] == list(range(3, 39))


def test_a_position_that_does_not_hold_its_record_is_not_trusted(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append("c", [b"a", b"b", b"c"])
    wrong = Position(2, 1, 0)  # record 1's offset, not record 2's
    assert [r for chunk in read_payloads(spool, "c", 2, 3, wrong) for r in chunk] == [
        (2, b"b"),
        (3, b"c"),
    ]


def test_a_large_kafka_backlog_is_cut_in_order_and_keeps_its_partition() -> None:
    found = [("t", 0, 100, 10_100), ("t", 1, 0, 50), ("u", 0, 5, 2_005)]
    cut = K.split_ranges(found, tasks=6, min_rows=1_000)
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for topic, partition, first, end in cut:
        by_partition.setdefault((topic, partition), []).append((first, end))
    assert by_partition[("t", 1)] == [(0, 50)]  # small: never cut
    assert by_partition[("u", 0)] == [(5, 2_005)]  # its share of the tasks is one
    pieces = by_partition[("t", 0)]
    assert len(pieces) == 5 and pieces[0][0] == 100 and pieces[-1][1] == 10_100
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))  # contiguous
    # Few records, or no more tasks wanted than there are ranges: as found.
    assert K.split_ranges(found, tasks=3, min_rows=1_000) == found
    assert K.split_ranges(found, tasks=8, min_rows=10_000) == found
