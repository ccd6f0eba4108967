"""Records in bulk: `records.source_record` over an Arrow array of payloads, and `RAW_SCHEMA`
as Arrow, so that a source's `read` yields `pyarrow.RecordBatch`es instead of Python tuples.

`checked(payloads)` gives the same `(raw, error)` per record as `source_record`, with the
work done by Arrow's kernels for the common record: the UTF-8 check is one cast of the whole
array, the cheap tests that let `source_record` skip its parse (no `"$`, one object's shape, no
number that may be beyond a double) are regex matches over the array, and `prefer_double`'s
rewrite of fractional literals is a regex replacement at the numbers (see `_rewrite_decimals`).
A record that any test flags, and every record of an array that is not all UTF-8, goes
through `source_record` itself: those are the records that may be poison, rare in a healthy
stream.

One wrapper is common in a healthy stream: the event time as `{"$date": "<ISO-8601>"}`. A
record whose only `"$` is one such wrapper does not take the exact path for it: its date
string is cut out (`_wrapped_dates`) and checked by the rule `source_record` applies to it
(`ejson.date_problem`; for the common shape `_COMMON_DATE`, the same rule in bulk), and only
a record whose date fails takes the exact path (measured:
the exact path's parse and walk of every record was half of the File source's Python time
on timestamped input; see benchmarks/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline_stages._connectors.sources.records import DATE_WRAPPER, ONE_OBJECT, source_record
from pipeline_stages._documents.ejson import date_problem

#: `raw_source.RAW_SCHEMA` as Arrow (what the sources' `read` yields).
RAW_ARROW: Final = pa.schema(
    [
        ("part", pa.int32()),
        ("seq", pa.int64()),
        ("raw", pa.string()),
        ("source_ts_ms", pa.int64()),
        ("meta", pa.string()),
        ("error", pa.string()),
    ]
)

#: Records `source_record` would parse, or whose rewrite the regex below cannot do exactly:
#: a `"$` (a possible wrapper); a record of another shape than one object (`_ONE_OBJECT`,
#: tested apart); the marks of a number
#: beyond a double (`records._NUMBER_MARKS`); a non-ASCII decimal digit (Python's `\d`
#: matches them, `[0-9]` here does not); a NUL (the marker); a fractional literal followed
#: by a quote (the replacement consumes the character after a number); a `$` written `\u0024`
#: (a key Spark reads as a wrapper's).
_EXACT_PATH: Final = r'[eE]\+?[0-9]{3}|[0-9]{300}|[^\P{Nd}0-9]|\x00|[0-9]\.[0-9]+"|\\u0024'
#: A possible Extended JSON wrapper (or a `$` key or text): the exact path, unless it is the
#: record's one `DATE_WRAPPER`.
_DOLLAR: Final = r'"\$'
#: The common shape of that date: to the second, an optional fraction of up to 6 digits, `Z`.
#: Its fields are in range but for the day of the month (and year 0), which `_common_dates`
#: checks in bulk; `date_problem` accepts exactly the strings of this shape that pass.
_COMMON_DATE: Final = (
    r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?Z$"
)
#: `records.ONE_OBJECT`, anchored: a record of another shape takes the exact path.
_ONE_OBJECT: Final = "^" + ONE_OBJECT + "$"
#: `json_text._STRING_OR_DECIMAL` without its look-ahead: the character after the number is
#: matched (and put back) instead. Strings are marked with NUL so that the decimals' marks
#: can be told apart afterwards: a string's mark follows its closing quote, a number's a digit.
_STRING_OR_DECIMAL: Final = r'("(?:[^"\\]|\\.)*")|(-?[0-9]+\.[0-9]+)([^0-9eE.]|$)'
_MARK: Final = "\x00"
#: What every rewritten literal contains: records without it are left as they are.
_FRACTION: Final = r"[0-9]\.[0-9]"
#: What ends a number in valid JSON (besides the end of the text): the followers that
#: `_DECIMAL_AT_VALUE_END` accepts. `_STRING_OR_DECIMAL` accepts any but `[0-9eE.]`.
_VALUE_END: Final = r"[,}\] \t\r\n]"
#: `_STRING_OR_DECIMAL`'s number alone, for the records `_NOT_BY_NUMBERS_ALONE` leaves: it
#: matches only at numbers, where the other matches every string too, and each match's
#: submatches cost (~2 us a record of six fields, measured). It inserts the same `e0`.
_DECIMAL_AT_VALUE_END: Final = r"([0-9]\.[0-9]+)(" + _VALUE_END + r"|$)"
#: Records where `_DECIMAL_AT_VALUE_END` may differ from `_STRING_OR_DECIMAL`, scanning their
#: strings as that does (`\\.` takes an escape and what it escapes), in one anchored regex
#: without captures (RE2 answers it in one pass of its DFA):
#: - a fraction followed by a value end inside a string (a lone backslash may precede its
#:   first digit: the raw text is what the short pattern reads);
#: - a string left open (at the end, or at a backslash before a newline, which RE2's `.`
#:   does not match): `_STRING_OR_DECIMAL` reads what follows it as outside any string;
#: - outside strings, a fraction followed by anything else that is no `[0-9eE.]`.
#: A date's `20.000Z` in a string is none of these, so timestamped records take the short way.
_NOT_BY_NUMBERS_ALONE: Final = (
    r'^(?:[^"]|"(?:[^"\\]|\\.)*")*(?:'
    r'"(?:[^"\\]|\\.)*\\?[0-9]\.[0-9]+(?:' + _VALUE_END + r"|$)"
    r'|"(?:[^"\\]|\\.)*(?:\\\n|\\?$)'
    r"|[0-9]\.[0-9]+[^0-9eE.,}\] \t\r\n])"
)
#: The compact form of `DATE_WRAPPER`: its date string is the text up to the next quote.
_COMPACT_DATE: Final = '{"$date":"'
_DAYS_IN_MONTH: Final = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
#: `bytes.strip()`'s whitespace: a line of only these is blank.
_BLANK: Final = rb"^[ \t\n\r\x0b\x0c]*$"


def blank(lines: pa.Array) -> pa.Array:
    """Which lines (binary) hold nothing but whitespace (the File source skips them)."""
    return pc.match_substring_regex(lines, _BLANK.decode("latin-1"))


def checked(payloads: pa.Array) -> tuple[pa.Array, pa.Array]:
    """`(raw, error)` string arrays of binary `payloads`: `source_record` of each."""
    try:
        text = payloads.cast(pa.string())
    except pa.ArrowInvalid:  # some record is not UTF-8: the exact path for all
        return _exact(payloads.to_pylist())
    exact = pc.fill_null(
        pc.or_(
            pc.or_(
                pc.match_substring_regex(text, _EXACT_PATH),
                pc.invert(pc.match_substring_regex(text, _ONE_OBJECT)),
            ),
            _wrappers_to_parse(text),
        ),
        False,
    )
    raw = _rewrite_decimals(text)
    error = pa.nulls(len(text), pa.string())
    flagged = np.flatnonzero(exact.to_numpy(zero_copy_only=False))
    if len(flagged):
        found = [source_record(payloads[int(i)].as_py()) for i in flagged]
        raw = pc.replace_with_mask(raw, exact, pa.array([r for r, _ in found], pa.string()))
        error = pc.replace_with_mask(error, exact, pa.array([e for _, e in found], pa.string()))
    return raw, error


def _wrappers_to_parse(text: pa.Array) -> pa.Array:
    """Which records hold a `"$` that only parsing can judge: any but a valid date in the
    record's one `DATE_WRAPPER` (see the module docstring)."""
    dollars = pc.fill_null(pc.count_substring_regex(text, _DOLLAR), 0)
    has_dollar = pc.greater(dollars, 0)
    one_date = pc.fill_null(
        pc.and_(pc.equal(dollars, 1), pc.match_substring_regex(text, DATE_WRAPPER)), False
    )
    candidates = np.flatnonzero(one_date.to_numpy(zero_copy_only=False))
    if not len(candidates):
        return has_dollar
    dates = _wrapped_dates(pc.take(text, pa.array(candidates)))
    common = pc.match_substring_regex(dates, _COMMON_DATE).to_numpy(zero_copy_only=False)
    valid = np.zeros(len(text), dtype=bool)
    valid[candidates[common]] = _common_dates(pc.filter(dates, pa.array(common)))
    # Other shapes (offsets, a space, no time, ...) are rarer: each distinct one once.
    verdicts: dict[str, bool] = {}
    others = candidates[~common]
    for index, date in zip(
        others, pc.take(dates, np.flatnonzero(~common)).to_pylist(), strict=True
    ):
        ok = verdicts.get(date)
        if ok is None:
            ok = verdicts[date] = date_problem(date) is None
        valid[index] = ok
    return pc.and_(has_dollar, pc.invert(pa.array(valid)))


def _wrapped_dates(text: pa.Array) -> pa.Array:
    """The date string of each record's one `DATE_WRAPPER` (the records have one `"$`).

    A compact wrapper's date is cut out with two literal splits: the regex's captures cost
    ~0.5 us a record (measured), most of the one-date check. The one `"$` is the wrapper's,
    so the text after `_COMPACT_DATE` is its date up to the next quote.
    """
    compact = pc.fill_null(pc.match_substring(text, _COMPACT_DATE), False)
    if pc.all(compact).as_py():
        return _date_after_compact_wrapper(text)
    dates = pc.replace_with_mask(
        pa.nulls(len(text), pa.string()),
        compact,
        _date_after_compact_wrapper(pc.filter(text, compact)),
    )
    spaced = pc.invert(compact)
    found = pc.struct_field(pc.extract_regex(pc.filter(text, spaced), DATE_WRAPPER), "date")
    return pc.replace_with_mask(dates, spaced, found)


def _date_after_compact_wrapper(text: pa.Array) -> pa.Array:
    after = pc.list_element(pc.split_pattern(text, _COMPACT_DATE, max_splits=1), 1)
    return pc.list_element(pc.split_pattern(after, '"', max_splits=1), 0)


def _common_dates(dates: pa.Array) -> np.ndarray:
    """Which `_COMMON_DATE` strings are dates (`date_problem` is None): year 1 on, and a day
    the month has. `date_problem` per string cost ~1 us a record, a third of `checked` on
    timestamped lines (`benchmarks/RESULTS.md`)."""
    year = pc.cast(pc.utf8_slice_codeunits(dates, 0, 4), pa.int32()).to_numpy()
    month = pc.cast(pc.utf8_slice_codeunits(dates, 5, 7), pa.int32()).to_numpy()
    day = pc.cast(pc.utf8_slice_codeunits(dates, 8, 10), pa.int32()).to_numpy()
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    days = _DAYS_IN_MONTH[month - 1] + ((month == 2) & leap)
    return (year >= 1) & (day <= days)


def _rewrite_decimals(text: pa.Array) -> pa.Array:
    """`json_text.prefer_double` of every record (see `_STRING_OR_DECIMAL`; the records this
    cannot rewrite exactly take the exact path)."""
    has = pc.fill_null(pc.match_substring_regex(text, _FRACTION), False)
    count = pc.sum(has).as_py() or 0
    if count == 0:
        return text
    subset = text if count == len(text) else pc.filter(text, has)
    rewritten = pc.replace_substring_regex(subset, _DECIMAL_AT_VALUE_END, r"\1e0\2")
    around = pc.fill_null(pc.match_substring_regex(subset, _NOT_BY_NUMBERS_ALONE), False)
    if pc.any(around).as_py():
        skipped = _rewrite_around_strings(pc.filter(subset, around))
        rewritten = pc.replace_with_mask(rewritten, around, skipped)
    return rewritten if count == len(text) else pc.replace_with_mask(text, has, rewritten)


def _rewrite_around_strings(text: pa.Array) -> pa.Array:
    """`json_text.prefer_double` of records that may hold a fraction in a string."""
    marked = pc.replace_substring_regex(text, _STRING_OR_DECIMAL, r"\1\2" + _MARK + r"\3")
    return pc.replace_substring(pc.replace_substring(marked, '"' + _MARK, '"'), _MARK, "e0")


def _exact(payloads: list[Any]) -> tuple[pa.Array, pa.Array]:
    found = [source_record(p) for p in payloads]
    return pa.array([r for r, _ in found], pa.string()), pa.array(
        [e for _, e in found], pa.string()
    )


def raw_batch(
    *, part: Any, seq: Any, raw: Any, source_ts_ms: Any, meta: Any, error: Any
) -> pa.RecordBatch:
    """A `RAW_ARROW` batch; each column is an array, or a scalar repeated for every row."""
    n = len(seq)
    columns = []
    for value, field in zip((part, seq, raw, source_ts_ms, meta, error), RAW_ARROW, strict=True):
        if value is None:
            array = pa.nulls(n, field.type)
        elif isinstance(value, pa.Array):
            array = value.cast(field.type)
        elif isinstance(value, np.ndarray | list):
            array = pa.array(value, field.type)
        else:
            array = pa.repeat(pa.scalar(value, field.type), n)
        columns.append(array)
    return pa.RecordBatch.from_arrays(columns, schema=RAW_ARROW)


def raw_rows(batches: Iterable[pa.RecordBatch]) -> list[tuple[Any, ...]]:
    """The rows of `RAW_ARROW` batches as tuples in `RAW_SCHEMA` order (for tests and tools
    that look at what a reader yields)."""
    out: list[tuple[Any, ...]] = []
    for batch in batches:
        out.extend(zip(*(column.to_pylist() for column in batch.columns), strict=True))
    return out
