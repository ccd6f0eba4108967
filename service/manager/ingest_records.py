"""Cutting an ingest body into records, byte for byte (no Spark, no web framework: the CLI
cuts files with it too before it sends them).

A JSON array's elements are cut out of the text where they are, never parsed and written
again, so `10` vs `10.0`, key order, duplicate keys and escapes reach the spool as sent, like
NDJSON lines. Arrays of any depth are cut (`_cut_deep` when Python's parser would recurse too
deep); whether a record is one the pipeline reads is `records.record_problem`'s business.
"""

from __future__ import annotations

import json
import re

_SPACE = re.compile(r"[ \t\n\r]*")
#: JSON string literals and the punctuation that structures an array (for `_cut_deep`).
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')
#: Finds record boundaries only; every record's content is judged by `record_problem`.
_DECODER = json.JSONDecoder()


def _skip_space(text: str, at: int) -> int:
    """The index of the first non-blank character at or after `at`."""
    match = _SPACE.match(text, at)
    return match.end() if match else at


def split_lines(body: bytes) -> list[bytes]:
    """NDJSON records: non-blank lines, without their line ending."""
    return [line.rstrip(b"\r") for line in body.split(b"\n") if line.strip()]


def split_json(body: bytes) -> list[bytes]:
    """Records of a JSON body, each as its bytes in the body: the elements of an array, or the
    value itself. Any depth is split (a record nesting deeper than Spark reads, more than
    `SPARK_MAX_DEPTH` levels, is one record the pipeline sends to the DLQ).

    Raises:
        ValueError: The body is not JSON (the message says where).
    """
    text = body.decode("utf-8")
    start = _skip_space(text, 0)
    if not text.startswith("[", start):
        try:
            json.loads(text)
        except RecursionError:
            pass  # deeper than Python's parser recurses: the record's verdict says more
        return [text.strip(" \t\n\r").encode("utf-8")]
    try:
        records, end = _cut_elements(text, start)
    except RecursionError:
        records, end = _cut_deep(text, start)
    _only_space_after(text, end)
    return [record.encode("utf-8") for record in records]


def _only_space_after(text: str, end: int) -> None:
    rest = _skip_space(text, end)
    if rest != len(text):
        raise ValueError(f"extra data after the JSON value at char {rest}")


def _cut_elements(text: str, start: int) -> tuple[list[str], int]:
    """The array's elements at `start` (with the stdlib's parser) and the end of the array."""
    i = _skip_space(text, start + 1)
    if text.startswith("]", i):
        return [], i + 1
    records: list[str] = []
    while True:
        _, end = _DECODER.raw_decode(text, i)
        records.append(text[i:end])
        i = _skip_space(text, end)
        if text.startswith(",", i):
            i = _skip_space(text, i + 1)
        elif text.startswith("]", i):
            return records, i + 1
        else:
            raise ValueError(f"expected ',' or ']' at char {i}")


def _cut_deep(text: str, start: int) -> tuple[list[str], int]:
    """`_cut_elements` for arrays whose elements nest deeper than Python's parser recurses:
    cut at the array's own commas (strings skipped), without parsing the elements."""
    depth, cuts = 0, [start]
    for match in _TOKEN.finditer(text, start):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                cuts.append(match.start())
                pairs = zip(cuts, cuts[1:], strict=False)
                records = [text[a + 1 : b].strip(" \t\n\r") for a, b in pairs]
                return ([] if records == [""] else records), match.end()
        elif token == "," and depth == 1:
            cuts.append(match.start())
    raise ValueError("the array is not closed")
