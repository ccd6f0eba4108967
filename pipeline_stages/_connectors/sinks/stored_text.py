"""Which output texts a store can keep as they are, without decoding and encoding them again.

An output's document is JSON text from Spark (`to_json`). `targets_grouping.stored_document`
parses it, checks what a collection may not hold and decodes its Extended JSON, and the store
then encodes it back to its storage text, ~100 us a document in Python (most of a `$merge`
sink's time, `benchmarks/RESULTS.md`). For the common document that round trip changes
nothing a reader can see: no Extended JSON but dates, nothing those checks refuse, and an
`_id` that is either the document's first field (an integer or a plain string) or none (the
ObjectId of the output's key is put first). `stored_row` says which texts those are, from the
text alone; a text it refuses takes the full path, which also gives the DLQ its reason.
`insert_new_as_texts` writes a batch of them to a store that takes texts (the embedded one),
for the writers whose effect on a new document is to insert it (`$merge` on `_id` that
inserts, a collection `$emit`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Final

from pipeline_stages._connectors.ports import NewDocumentTexts
from pipeline_stages._connectors.sinks.plans import RESERVED_LOCAL_DB, Name, namespace_problem
from pipeline_stages._documents.ejson import format_date, parse_date
from pipeline_stages._stream.batch import Output
from pipeline_stages._stream.json_text import (
    BSON_MAX_DEPTH,
    SURROGATE_ESCAPE,
    nests_deeper_than,
)

#: Digits to `0`: an integer beyond 64 bits has at least 19 digits in a row.
DIGITS_TO_ZERO: Final = str.maketrans("123456789", "000000000")
LONG_DIGITS: Final = "0" * 19
#: A `$date` wrapper as Spark's `to_json` writes it: compact, to the millisecond, in UTC.
_DATE: Final = re.compile(
    r'\{"\$date":"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)"\}'
)
#: An ObjectId's hex, as `sinks.ids` derives it from an output's key.
OBJECT_ID_HEX: Final = re.compile(r"[0-9a-fA-F]{24}\Z")
#: A document's own `_id` as its first field (where Spark's `to_json` writes it when no other
#: name sorts before it), an integer or a string without escapes.
_OWN_ID: Final = re.compile(r'\{"_id":(-?[0-9]+|"[^"\\]*")[,}]')


def insert_new_as_texts(
    open_store: Callable[[], Any],
    outputs: Sequence[Output],
    keys: Sequence[str],
    *,
    db: Name,
    coll: Name,
    embedded: bool,
) -> bool:
    """Write a batch as the store's own texts when every document is new and already in that
    form; True when it was written, False when the caller must write it the full way.

    For the writers whose effect on a document the store does not hold is to insert it, `_id`
    first (its own, or the ObjectId of its output key: `ids.with_id`): the collection is the
    same either way. A replayed batch finds its ids stored and takes the full path, as does a
    batch holding any document the full path would check, decode or refuse, or bound for a
    computed or refused namespace.
    """
    target_db, target_coll = db.literal, coll.literal
    if target_db is None or target_coll is None:
        return False
    if namespace_problem(target_db, target_coll) is not None or (
        embedded and target_db == RESERVED_LOCAL_DB
    ):
        return False
    rows = []
    for output, key in zip(outputs, keys, strict=True):
        row = stored_row(output.doc_json, key)
        if row is None:
            return False
        rows.append(row)
    store = open_store()
    return isinstance(store, NewDocumentTexts) and store.insert_new_texts(
        target_db, target_coll, rows
    )


def stored_row(text: str, key: str) -> tuple[str, str] | None:
    """`(_id, text)` as a store keeps an output's document (both JSON text, `_id` first in
    the document), when no decoding is needed (`storable_as_is`), else None.

    The `_id` is the document's own when it is the first field and an integer or a string
    without escapes, and appears nowhere else in the text (looked for as text: conservative);
    with no `_id` anywhere it is the ObjectId of the output's key, put first.
    """
    if not storable_as_is(text):
        return None
    own = _OWN_ID.match(text)
    if own is not None:
        return (own.group(1), text) if text.count('"_id"') == 1 else None
    if '"_id"' in text or not OBJECT_ID_HEX.match(key):
        return None
    oid = '{"$oid":"' + key.lower() + '"}'
    fields = text[1:].lstrip()
    return oid, '{"_id":' + oid + ("}" if fields.startswith("}") else "," + fields)


def storable_as_is(text: str) -> bool:
    """Whether a document's JSON text needs no decoding to be kept by a store.

    True for an object whose only `"$` starts a `$date` wrapper of a date in the years
    1970-9999 written as the stores write it (so decoding it and encoding it again gives the
    same text), with no integer of 19 digits or more, no escaped surrogate, and nesting
    within BSON's limit: what `stored_document` would accept and turn into the same document.
    """
    if not text.startswith("{") or not is_utf8(text):
        return False
    if LONG_DIGITS in text.translate(DIGITS_TO_ZERO) or SURROGATE_ESCAPE.search(text):
        return False
    wrappers = text.count('"$')
    if wrappers:
        dates = _DATE.findall(text)
        if len(dates) != wrappers or not all(_stored_as_written(date) for date in dates):
            return False
    return not nests_deeper_than(text, BSON_MAX_DEPTH)


def is_utf8(text: str) -> bool:
    """Whether `text` can be written as UTF-8 (it holds no lone surrogate)."""
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
