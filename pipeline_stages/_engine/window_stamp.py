"""A source's stamp on a document, in Python: for the late documents of an unstamped window.

A source stamps every document with its event time (`tsFieldName`, default `_ts`) and its
stream metadata (`streamMetaFieldName`, default `_stream_meta`) before the first stage sees it
(`ingest._project_metadata`, in Spark). When the window is the first stage and nothing in it
reads those fields or the whole document, the batch engine reads the source's unstamped
documents instead (`window_compile`), because stamping every document in Spark cost more
than the window's own columns (README, *Performance*). The only documents whose copy anyone
sees are the late ones, in the DLQ, as they entered the window: stamped. `stamp` stamps them
the way Spark does, and the tests compare the two on every kind of value.
"""

from __future__ import annotations

from typing import Any

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


def _sorted(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's fields in a VARIANT object's order: Java's string order (UTF-16 units)."""
    return dict(sorted(obj.items(), key=lambda item: item[0].encode("utf-16-be")))


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
