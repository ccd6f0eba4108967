"""Which output texts a store can keep as they are, without decoding and encoding them again.

An output's document is JSON text from Spark (`to_json`). `targets_grouping.stored_document`
parses it, checks what a collection may not hold and decodes its Extended JSON, and the store
then encodes it back to its storage text, ~100 us a document in Python (most of a `$merge`
sink's time, `benchmarks/RESULTS.md`). For the common document that round trip changes
nothing a reader can see: no `_id` of its own, no Extended JSON but dates, nothing those
checks refuse. `storable_as_is` says which texts those are, from the text alone; a text it
refuses takes the full path, which also gives the DLQ its reason.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Final

from pipeline_stages._documents.ejson import format_date, parse_date
from pipeline_stages._stream.json_text import BSON_MAX_DEPTH, nests_deeper_than

#: A `\\uD800`-`\\uDFFF` escape: JSON text may hold half a surrogate pair, UTF-8 cannot.
SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
#: Digits to `0`: an integer beyond 64 bits has at least 19 digits in a row.
DIGITS_TO_ZERO: Final = str.maketrans("123456789", "000000000")
LONG_DIGITS: Final = "0" * 19
#: A `$date` wrapper as Spark's `to_json` writes it: compact, to the millisecond, in UTC.
_DATE: Final = re.compile(
    r'\{"\$date":"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)"\}'
)
#: An ObjectId's hex, as `sinks.ids` derives it from an output's key.
OBJECT_ID_HEX: Final = re.compile(r"[0-9a-fA-F]{24}\Z")


def storable_as_is(text: str) -> bool:
    """Whether a document's JSON text is already what a store keeps for it.

    True for an object without an `_id` anywhere (conservative: the key is looked for in the
    text), whose only `"$` starts a `$date` wrapper of a date in the years 1970-9999 written
    as the stores write it (so decoding it and encoding it again gives the same text), with
    no integer of 19 digits or more, no escaped surrogate, and nesting within BSON's limit:
    exactly what `stored_document` would accept and turn into the same document.
    """
    if not text.startswith("{") or '"_id"' in text or not _is_utf8(text):
        return False
    if LONG_DIGITS in text.translate(DIGITS_TO_ZERO) or SURROGATE_ESCAPE.search(text):
        return False
    wrappers = text.count('"$')
    if wrappers:
        dates = _DATE.findall(text)
        if len(dates) != wrappers or not all(_stored_as_written(date) for date in dates):
            return False
    return not nests_deeper_than(text, BSON_MAX_DEPTH)


def _is_utf8(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


@lru_cache(maxsize=4096)
def _stored_as_written(date: str) -> bool:
    """Whether a store writes this `$date` string back unchanged (a real date, 1970-9999);
    cached: a window's results share a few dates."""
    try:
        return format_date(parse_date(date)) == date
    except ValueError:
        return False
