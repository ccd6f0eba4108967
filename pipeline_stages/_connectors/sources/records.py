"""What a source checks in a record before Spark parses it, and whether a record will reach the
pipeline at all.

Spark parses each record (`sources.ingest`) and sends what it cannot read to the DLQ: text
that is not one JSON object, `NaN`, duplicate keys, lone surrogates, nesting deeper than
`SPARK_MAX_DEPTH`. Some records Spark would read *wrongly* instead, so every source checks
them first (`source_record`) and hands the reason over in the row's `error` column, which
sends the record to the DLQ with it:

* bytes that are not UTF-8: Spark would replace them with U+FFFD (several such records were
  once grouped under one "\\ufffd\\ufffd\\ufffd" key). The record's `raw` becomes
  `{"$binary": {"base64": <the bytes>, "subType": "00"}}`, so the DLQ record holds the bytes
  as received (its `doc` is that binary value);
* an Extended JSON wrapper Sluice reads that is not valid (`{"$date": "garbage"}`, a date
  outside the years 1 to 9999, `{"$numberDecimal": "x"}`, `{"$oid": 1}`: see
  `_documents.ejson.wrapper_problem`): Spark would carry it as a date, a decimal or an id
  it cannot read, and a sink would fail on it or store it as an ordinary object;
* a number beyond a double's range (`1e400`, or an integer of 309 digits and more): Spark
  would carry it as the string `"Infinity"`;
* text after the object (`{"a": 1} x`, `{"a": 1}{"a": 2}`, `{"a": 1}}`): Spark would read
  the first object and drop the rest.

Only records that can hold such things are parsed here (they contain `"$`, a `$` written
`\\u0024` or a large exponent, or are not one object from their first `{` to their last `}`:
`ONE_OBJECT`), so plain documents cost a UTF-8 check, three substring scans and one regex
match.

`record_problem` is the whole verdict on a record (these checks and what Spark rejects), in
plain Python: the HttpIngest endpoint counts the records it will send to the DLQ with it
(`invalid`).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

from pipeline_stages._documents.ejson import date_problem, invalid_wrapper
from pipeline_stages._stream.json_text import (
    SPARK_MAX_DEPTH,
    SURROGATE_ESCAPE,
    json_depth,
    nests_deeper_than,
    prefer_double,
)

#: `{"$binary": ...}` has no number literal and no `.`: `prefer_double` leaves it alone.
NOT_UTF8: Final = "input is not valid UTF-8"
NOT_AN_OBJECT: Final = "input is not a valid JSON object"

#: An exponent of 300 or more (with or without sign or leading zeros), or 300 digits in a
#: row: the number may be beyond a double's range. Matched inside strings too (the check
#: that follows parses).
_LARGE_NUMBER = re.compile(r"[eE]\+?0*(?:[3-9]\d\d|\d{4,})|\d{300}")
#: Decimal digits a double holds the magnitude of (1e308; DBL_MAX is 1.8e308).
_DOUBLE_DIGITS = 309
#: Digits to `0` and `E` to `e`, so that two substring searches find every place where
#: `_LARGE_NUMBER` may match (a cheap test run on every record; the regex only when it hits).
_NUMBER_SHAPE = bytes.maketrans(b"123456789E", b"000000000e")
_NUMBER_MARKS = (b"e000", b"e+000", b"0" * 300)
#: Nesting levels inside the outer object that `ONE_OBJECT` follows: a deeper record is parsed.
_SHAPE_DEPTH: Final = 32


def _one_object_pattern(depth: int) -> str:
    """`ONE_OBJECT`'s text: strings as JSON writes them (an escape takes the character after
    it), brackets of either kind opening and closing up to `depth` levels inside the outer
    braces. Which kind closes which is Spark's parser's to check; this only finds where the
    outer object ends. Its alternatives start with different characters, so neither Python's
    `re` nor RE2 backtracks into them."""
    string = r'"(?:[^"\\]|\\.)*"'
    plain = r'[^"{}\[\]]'
    inner = f"(?:{plain}|{string})"
    for _ in range(depth):
        inner = f"(?:{plain}|{string}|[{{\\[]{inner}*[}}\\]])"
    return r"[ \t\r\n]*\{" + inner + r"*\}[ \t\r\n]*"


#: A whole record that is one JSON object's shape: JSON whitespace, `{`, what nests inside it,
#: the `}` that closes it, whitespace. Spark's `parse_json` reads the first JSON value of a
#: text and ignores whatever follows it (measured on Spark 4.3: `{"a":1} {"b":2}` reads as
#: `{"a":1}`), so a record of any other shape is parsed here (`_content_problem`). RE2 answers
#: it in one pass (~0.2 us a record of the benchmarks' shape); Python's `re`, ~2.7 us.
ONE_OBJECT: Final = _one_object_pattern(_SHAPE_DEPTH)
_ONE_OBJECT = re.compile(ONE_OBJECT)
_JSON_SPACE = re.compile(r"[ \t\r\n]*")
_PLAIN_DECODER = json.JSONDecoder()
#: `{"$date": "<ISO-8601-shaped text>"}` (JSON whitespace allowed; the same pattern in Python's
#: `re` and in RE2). Its string has no escapes (only digits, `-:.+TZ` and a space), so the
#: text matched is the string's value.
DATE_WRAPPER: Final = (
    r'\{[ \t\r\n]*"\$date"[ \t\r\n]*:[ \t\r\n]*"(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}'
    r'(?:[T ][0-9:.]+(?:Z|[+-][0-9:]+)?)?)"[ \t\r\n]*\}'
)
_DATE_WRAPPER = re.compile(DATE_WRAPPER)
#: `$` written as a JSON escape: a key `"\\u0024date"` is `$date` to Spark too.
_ESCAPED_DOLLAR: Final = "\\u0024"
#: The top-level keys that make Spark read a document as a wrapper (`_mql.values._WRAPPERS`).
_SPARK_WRAPPERS: Final = ("$date", "$oid", "$numberDecimal", "$numberLong")


def binary_json(data: bytes) -> str:
    """The relaxed Extended JSON of `data` as a binary value (subtype 0)."""
    encoded = base64.b64encode(data).decode("ascii")
    return json.dumps({"$binary": {"base64": encoded, "subType": "00"}})


def source_record(data: bytes | str | None) -> tuple[str | None, str | None]:
    """`(raw, error)` of one record for a source's row (see the module docstring).

    `raw` is the text for Spark (fractional literals kept doubles: `prefer_double`); `error`
    is None, or why the record goes to the DLQ (Spark's parse may add reasons of its own).
    """
    if data is None:
        return None, None
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            return binary_json(data), _not_utf8(data, error)
    else:
        text, data = data, data.encode("utf-8", "surrogatepass")
    return prefer_double(text), _content_problem(text, data)


def _not_utf8(data: bytes, error: UnicodeDecodeError) -> str:
    return f"{NOT_UTF8} (byte 0x{data[error.start]:02x} at offset {error.start})"


def _content_problem(text: str, data: bytes) -> str | None:
    """What Spark would read wrongly in `text` (`data` encoded; see the module docstring);
    None if nothing."""
    large = _maybe_large_number(data)
    if (
        '"$' not in text
        and _ESCAPED_DOLLAR not in text
        and not large
        and _ONE_OBJECT.fullmatch(text) is not None
    ):
        return None
    overflow: list[str] = []
    # Without a large number's marks no number can overflow, and the plain decoder reads
    # numbers in C (the checking hooks are a Python call per number).
    decoder = (
        json.JSONDecoder(parse_float=_checked_float(overflow), parse_int=_checked_int(overflow))
        if large
        else _PLAIN_DECODER
    )
    start = _space_end(text, 0)
    try:
        value, end = decoder.raw_decode(text, start)
    except (ValueError, RecursionError):
        # Not JSON (Spark refuses it too), or too deep to parse here (Spark decides).
        tail = text.rstrip()
        return None if tail.endswith("}") or not tail.lstrip().startswith("{") else NOT_AN_OBJECT
    if _space_end(text, end) != len(text):
        return NOT_AN_OBJECT  # a value and more: Spark would keep the value, drop the rest
    if overflow:
        shown = (
            overflow[0]
            if len(overflow[0]) <= 40
            else f"{overflow[0][:20]}… ({len(overflow[0])} characters)"
        )
        return f"number {shown} is beyond the range of a double"
    found = None if _only_a_valid_date(text) else invalid_wrapper(value)
    if found is not None:
        path, problem = found
        return f"invalid Extended JSON at {path}: {problem}"
    return None


def _only_a_valid_date(text: str) -> bool:
    """Whether the record's one `"$` is a `DATE_WRAPPER` of a date `date_problem` accepts: then
    it holds no invalid wrapper, and `invalid_wrapper`'s walk (~6 us a record of the
    benchmarks' shape, most of the ingest route's verdict) is not needed. The File source's
    bulk check (`arrow_records._wrappers_to_parse`) takes the same shortcut."""
    if text.count('"$') != 1 or _ESCAPED_DOLLAR in text:
        return False
    found = _DATE_WRAPPER.search(text)
    return found is not None and date_problem(found.group("date")) is None


def _space_end(text: str, at: int) -> int:
    """Where the JSON whitespace from `at` on ends."""
    space = _JSON_SPACE.match(text, at)
    assert space is not None  # noqa: S101 - the pattern matches the empty string
    return space.end()


def _maybe_large_number(data: bytes) -> bool:
    """Whether `data` may hold a number beyond a double (`_LARGE_NUMBER`)."""
    shape = data.translate(_NUMBER_SHAPE)
    if not any(mark in shape for mark in _NUMBER_MARKS):
        return False
    return _LARGE_NUMBER.search(data.decode("utf-8", "surrogatepass")) is not None


def _checked_float(overflow: list[str]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if math.isinf(value) and not overflow:
            overflow.append(text)
        return value

    return parse


def _checked_int(overflow: list[str]) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > _DOUBLE_DIGITS or (
            len(text.lstrip("-")) == _DOUBLE_DIGITS and math.isinf(float(text))
        ):
            if not overflow:
                overflow.append(text)
            return 0  # never converted: Python refuses integers of more than 4300 digits
        return int(text)

    return parse


class _Rejected(ValueError):
    """A strict parse found what Spark's parser refuses."""


def _no_constants(name: str) -> Any:
    raise _Rejected(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Rejected(f"duplicate key {json.dumps(key)}")
            seen.add(key)
    return obj


def _lone_surrogate(value: Any) -> str | None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            texts: list[str] = [item]
        elif isinstance(item, dict):
            texts = list(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                return f"\\u{ord(text[error.start]):04x}"
    return None


#: `json.loads` with these hooks builds a decoder per call.
_STRICT_DECODER = json.JSONDecoder(parse_constant=_no_constants, object_pairs_hook=_unique_keys)


def record_problem(data: bytes) -> str | None:
    """Why the pipeline will send this record to the DLQ at its source, or None.

    The sources' own checks (`source_record`), then what Spark's parser refuses: text that is
    not one JSON object, `NaN`/`Infinity`, duplicate keys, lone surrogates, nesting deeper
    than `SPARK_MAX_DEPTH` levels, and an object Spark reads as a wrapper at the top level.
    """
    # `source_record`'s verdict without its text: `prefer_double` only matters to Spark
    # (Python reads `1.5` and `1.5e0` alike), and it was a sixth of this function's time.
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as not_utf8:
        return _not_utf8(data, not_utf8)
    problem = _content_problem(text, data)
    if problem is not None:
        return problem
    try:
        value = _STRICT_DECODER.decode(text)
    except _Rejected as rejected:
        return f"{NOT_AN_OBJECT} ({rejected})"
    except RecursionError:
        depth = json_depth(text)
        if depth > SPARK_MAX_DEPTH:
            return f"{NOT_AN_OBJECT} (it nests {depth} levels; at most {SPARK_MAX_DEPTH} are read)"
        # Deeper than Python parses here, within what Spark reads: Spark decides the rest.
        return None if text.lstrip().startswith("{") else NOT_AN_OBJECT
    except ValueError:
        return NOT_AN_OBJECT
    if not isinstance(value, dict) or any(key in value for key in _SPARK_WRAPPERS):
        return NOT_AN_OBJECT
    # UTF-8 text holds no surrogate: only a `\\uD800`-`\\uDFFF` escape makes one.
    surrogate = _lone_surrogate(value) if SURROGATE_ESCAPE.search(text) else None
    if surrogate is not None:
        return f"{NOT_AN_OBJECT} (lone surrogate {surrogate} is not Unicode text)"
    if nests_deeper_than(text, SPARK_MAX_DEPTH):
        depth = json_depth(text)
        return f"{NOT_AN_OBJECT} (it nests {depth} levels; at most {SPARK_MAX_DEPTH} are read)"
    return None
