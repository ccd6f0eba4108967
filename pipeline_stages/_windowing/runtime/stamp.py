"""A source's stamp on a document, in Python: for the late documents of an unstamped window.

A source stamps every document with its event time (`tsFieldName`, default `_ts`) and its
stream metadata (`streamMetaFieldName`, default `_stream_meta`) before the first stage sees it
(`ingest._project_metadata`, in Spark). When the window is the first stage and nothing in it
reads those fields or the whole document, the window reads the source's unstamped documents
instead (`spark.unstamped`), because stamping every document in Spark cost more than the
window's own columns (`benchmarks/RESULTS.md`). The only documents whose copy anyone sees are
the late ones, in the DLQ, as they entered the window: stamped, the way Spark stamps them.
The tests compare both engines' copies with Spark's on every kind of value.

The batch engine reads the copies as VARIANT and stamps the decoded document (`stamp`). The
operator reads them as Spark's `to_json` text (`spark.compile._operator`) and stamps the text
(`stamp_text`), splicing the stamp's members in, so every other value keeps the text Spark
wrote for it.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

#: `(tsFieldName, streamMetaFieldName)`: how the source stamps documents.
Stamp = tuple[str, str]
#: The Extended JSON wrappers `values.kind_of` reads as a value other than an object: an
#: existing metadata field holding one is replaced, not merged into.
_WRAPPERS = ("$date", "$oid", "$numberDecimal", "$numberLong")


def stamp(
    doc: dict[str, Any],
    *,
    event_ms: int,
    meta: dict[str, Any],
    ts_field: str,
    meta_field: str,
) -> dict[str, Any]:
    """`doc` with the event time in `ts_field` and the stream metadata `meta` in
    `meta_field` (`""`: none), merged into an object already there, `meta` winning."""
    stamped = dict(doc)
    stamped[ts_field] = {"$date": date_text(event_ms)}
    if meta_field:
        existing = stamped.get(meta_field)
        if isinstance(existing, dict) and not any(key in existing for key in _WRAPPERS):
            meta = _sorted({**{k: v for k, v in existing.items() if k not in meta}, **meta})
        stamped[meta_field] = meta
    return _sorted(stamped)


def stamp_text(
    doc_json: str, *, event_ms: int, meta_json: str, ts_field: str, meta_field: str
) -> str:
    """`stamp` on JSON text: `doc_json` and `meta_json` are Spark's `to_json` of the
    unstamped document and of the stream metadata (both objects); the result is Spark's
    `to_json` of the stamped document. Only the stamp's members are written anew."""
    members = _members(doc_json)
    members[ts_field] = _member(ts_field, '{"$date":' + json.dumps(date_text(event_ms)) + "}")
    if meta_field:
        meta_text = meta_json
        existing = _plain_object_members(members.get(meta_field))
        if existing is not None:
            meta = _members(meta_json)
            kept = {k: m for k, m in existing.items() if k not in meta}
            meta_text = _object({**kept, **meta})
        members[meta_field] = _member(meta_field, meta_text)
    return _object(members)


class _Member(NamedTuple):
    """One member of an object's JSON text: the member (`"key":value`) and its value."""

    text: str
    value: str


def _member(key: str, value: str) -> _Member:
    """A new member; Spark writes keys without escaping what JSON allows unescaped."""
    return _Member(json.dumps(key, ensure_ascii=False) + ":" + value, value)


_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def _members(text: str) -> dict[str, _Member]:
    """An object's members from its JSON text (well-formed: Spark wrote it), in order, by
    key, each as written."""

    def skip_space(at: int) -> int:
        space = _SPACE.match(text, at)
        assert space is not None  # noqa: S101 - the pattern matches the empty string
        return space.end()

    members: dict[str, _Member] = {}
    at = skip_space(text.index("{") + 1)
    while text[at] != "}":
        # A key is a JSON string: decoding one at its quote is what `json.decoder.scanstring`
        # does past the quote (the decoder's scanner calls it), with a public, typed API.
        key, after_key = _DECODER.raw_decode(text, at)
        value_at = skip_space(skip_space(after_key) + 1)  # past the ':'
        _, value_end = _DECODER.raw_decode(text, value_at)
        members[key] = _Member(text[at:value_end], text[value_at:value_end])
        at = skip_space(value_end)
        if text[at] == ",":
            at = skip_space(at + 1)
    return members


def _plain_object_members(member: _Member | None) -> dict[str, _Member] | None:
    """The members of a member's value when it is an object `values.kind_of` reads as one
    (not one of the `_WRAPPERS`): what `stamp` merges the metadata into (None: it is not)."""
    if member is None or not member.value.startswith("{"):
        return None
    members = _members(member.value)
    return None if any(key in _WRAPPERS for key in members) else members


def _object(members: dict[str, _Member]) -> str:
    """An object's JSON text from its members, in a VARIANT object's order (`_sorted`)."""
    ordered = sorted(members.items(), key=_variant_order)
    return "{" + ",".join(member.text for _, member in ordered) + "}"


def _sorted(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's fields in a VARIANT object's order (`_variant_order`)."""
    return dict(sorted(obj.items(), key=_variant_order))


def _variant_order(item: tuple[str, Any]) -> bytes:
    """The sort key of an object's `(key, value)` in a VARIANT object's order: Java's string
    order of the keys (UTF-16 units)."""
    return item[0].encode("utf-16-be")


def date_text(epoch_ms: int) -> str:
    """Spark's `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'` of an epoch millisecond (UTC, proleptic
    Gregorian: year 0 is `0000`, years past 9999 and before 0 carry a sign)."""
    days, ms_of_day = divmod(epoch_ms, 86_400_000)
    year, month, day = _civil_from_days(days)
    seconds, millis = divmod(ms_of_day, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    if year < 0:
        year_text = f"-{-year:04d}"
    elif year > 9999:
        year_text = f"+{year}"
    else:
        year_text = f"{year:04d}"
    return f"{year_text}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`)."""
    shifted = days + 719_468
    era = shifted // 146_097
    day_of_era = shifted - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + 3 if month_index < 10 else month_index - 9
    year = year_of_era + era * 400 + (1 if month <= 2 else 0)
    return year, month, day
