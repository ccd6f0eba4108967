"""`runtime.stamp`: a source's stamp in Python, on values and on JSON text (the Spark side is
compared in `tests/integration/test_window_batch_engine.py`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from pipeline_stages._stream.json_text import value_json
from pipeline_stages._windowing.runtime.stamp import date_text, stamp, stamp_text

SOURCE = {"source": {"type": "kafka", "partition": 0}}


@pytest.mark.parametrize(
    ("epoch_ms", "text"),
    [  # Spark's `date_format(timestamp_millis(ms), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")`
        (0, "1970-01-01T00:00:00.000Z"),
        (-1, "1969-12-31T23:59:59.999Z"),
        (1_704_067_200_123, "2024-01-01T00:00:00.123Z"),
        (-62_135_596_800_001, "0000-12-31T23:59:59.999Z"),
        (253_402_300_800_000, "+10000-01-01T00:00:00.000Z"),
        (10**15, "+33658-09-27T01:46:40.000Z"),
        (-(10**15), "-29719-04-05T22:13:20.000Z"),
    ],
)
def test_dates_are_written_as_spark_writes_them(epoch_ms: int, text: str) -> None:
    assert date_text(epoch_ms) == text


def test_dates_agree_with_the_calendar_across_four_centuries() -> None:
    start = datetime(1900, 1, 1, tzinfo=UTC)
    for days in range(0, 146_097 + 400, 37):
        moment = start + timedelta(days=days, milliseconds=days % 86_400_000)
        epoch_ms = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
        assert date_text(epoch_ms) == moment.strftime("%Y-%m-%dT%H:%M:%S.") + (
            f"{moment.microsecond // 1000:03d}Z"
        )


def test_the_stamp_merges_into_an_object_and_replaces_anything_else() -> None:
    doc = {"z": 1, "_stream_meta": {"mine": 1, "source": "theirs"}, "_ts": "user's", "a": 2}
    stamped = stamp(doc, event_ms=0, meta=SOURCE, ts_field="_ts", meta_field="_stream_meta")
    assert stamped == {
        "_stream_meta": {"mine": 1, "source": SOURCE["source"]},
        "_ts": {"$date": "1970-01-01T00:00:00.000Z"},
        "a": 2,
        "z": 1,
    }
    assert list(stamped) == ["_stream_meta", "_ts", "a", "z"]  # a VARIANT object's order
    for other in ({"$date": "2024-01-01T00:00:00.000Z"}, {"$oid": "0" * 24}, 5, [1], None):
        replaced = stamp({"_stream_meta": other}, event_ms=0, meta=SOURCE, ts_field="_ts",
                         meta_field="_stream_meta")  # fmt: skip
        assert replaced["_stream_meta"] == SOURCE


def test_without_a_metadata_field_only_the_time_is_stamped() -> None:
    doc = {"_stream_meta": 5}
    assert stamp(doc, event_ms=1, meta=SOURCE, ts_field="at", meta_field="") == {
        "_stream_meta": 5,
        "at": {"$date": "1970-01-01T00:00:00.001Z"},
    }
    assert doc == {"_stream_meta": 5}  # the copy is stamped, not the document


def test_fields_sort_by_utf16_units_as_java_strings_do() -> None:
    stamped = stamp({"\uffff": 1, "😀": 2}, event_ms=0, meta={}, ts_field="_ts", meta_field="")
    # U+1F600 is a surrogate pair (0xD83D...), below U+FFFF in UTF-16, above it in code points.
    assert list(stamped) == ["_ts", "😀", "\uffff"]


DOCS: list[dict[str, object]] = [
    {},
    {"z": 1, "_stream_meta": {"mine": 1, "source": "theirs"}, "_ts": "user's", "a": 2},
    {"_stream_meta": {"$date": "2024-01-01T00:00:00.000Z"}},
    {"_stream_meta": {"$oid": "0" * 24, "x": 1}},
    {"_stream_meta": [1, {"source": 2}]},
    {"_stream_meta": None, "n": None},
    {"_stream_meta": {}},
    {"nested": {"b": [1, 2.5, {"c": "d"}], "a": True}, 'quote"key': "va\\lue\n", "é": "ü"},
    {"\uffff": 1, "😀": 2, "a": {"\uffff": 1, "😀": 2}},
]


@pytest.mark.parametrize("doc", DOCS)
@pytest.mark.parametrize(
    ("ts_field", "meta_field"), [("_ts", "_stream_meta"), ("at", "origin"), ("_ts", "")]
)
def test_stamping_text_gives_the_text_of_the_stamped_document(
    doc: dict[str, object], ts_field: str, meta_field: str
) -> None:
    doc = {**doc, **({"origin": doc["_stream_meta"]} if "_stream_meta" in doc else {})}
    unstamped = value_json(_sorted_deep(doc))
    text = stamp_text(unstamped, event_ms=1_704_067_200_123, meta_json=value_json(SOURCE),
                      ts_field=ts_field, meta_field=meta_field)  # fmt: skip
    expected = stamp(_sorted_deep(doc), event_ms=1_704_067_200_123, meta=SOURCE,
                     ts_field=ts_field, meta_field=meta_field)  # fmt: skip
    # The same values and fields in the same order (`value_json` escapes what Spark does not).
    assert json.dumps(json.loads(text)) == json.dumps(expected)


def test_stamping_text_keeps_every_value_as_written() -> None:
    # Spark's texts of a decimal, a double and a NaN: re-encoding them would change them.
    text = '{"d":1.50,"e":1.0E300,"n":NaN,"_stream_meta":{"source":{"type":"old"},"k":-0.0}}'
    stamped = stamp_text(text, event_ms=0, meta_json='{"source":{"type":"kafka"}}',
                         ts_field="_ts", meta_field="_stream_meta")  # fmt: skip
    assert stamped == (
        '{"_stream_meta":{"k":-0.0,"source":{"type":"kafka"}},'
        '"_ts":{"$date":"1970-01-01T00:00:00.000Z"},"d":1.50,"e":1.0E300,"n":NaN}'
    )


def test_stamping_text_reads_whitespace_between_tokens() -> None:
    stamped = stamp_text(' { "b" : [ 1 , 2 ] ,\n"a" : { } } ', event_ms=0, meta_json="{}",
                         ts_field="_ts", meta_field="")  # fmt: skip
    assert stamped == '{"_ts":{"$date":"1970-01-01T00:00:00.000Z"},"a" : { },"b" : [ 1 , 2 ]}'


def test_stamping_text_keeps_the_keys_as_written() -> None:
    stamped = stamp_text('{"\\u00e9":1,"😀":2}', event_ms=0, meta_json="{}", ts_field="é_ts",
                         meta_field="")  # fmt: skip
    assert stamped == '{"\\u00e9":1,"é_ts":{"$date":"1970-01-01T00:00:00.000Z"},"😀":2}'


def _sorted_deep(value: object) -> object:
    """`value` with every object's fields in a VARIANT object's order, as Spark holds it."""
    if isinstance(value, dict):
        return {
            k: _sorted_deep(v)
            for k, v in sorted(value.items(), key=lambda i: i[0].encode("utf-16-be"))
        }
    if isinstance(value, list):
        return [_sorted_deep(v) for v in value]
    return value
