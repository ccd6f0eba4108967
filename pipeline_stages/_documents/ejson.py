"""Extended JSON: the one codec of BSON values written as JSON (relaxed and canonical forms).

Two in-memory forms read it, and both go through this module:

* the **stored form** (`from_relaxed_ejson`), what the stores, the DLQ and the `$merge`
  writers hold: `datetime`, `ObjectId`, `bytes`, and plain JSON numbers. An object that
  looks like a wrapper but is not valid Extended JSON is kept as the user's object;
* the **MQL value form** (`from_ejson`), what the window runtime evaluates: the number
  wrappers become typed values too (`Int64`, `Decimal`, non-finite doubles), and an invalid
  wrapper is an error.

Dates follow the relaxed Extended JSON rule: an ISO string with an offset between the years
1970 and 9999, `{"$numberLong": "<ms>"}` otherwise. A date outside what Python can hold
(years 1 to 9999) is a `ValueError`, never an `OverflowError`: one document's content must
not be able to stop a query.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from bson import Int64, ObjectId
from bson.errors import InvalidId

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: The milliseconds of 0001-01-01 and of 9999-12-31T23:59:59.999, Python's date range.
MIN_DATE_MS: Final = -62_135_596_800_000
MAX_DATE_MS: Final = 253_402_300_799_999


def date_from_ms(epoch_ms: int) -> datetime:
    """The UTC datetime `epoch_ms` milliseconds after the Unix epoch.

    Raises:
        ValueError: the instant is outside the years 1 to 9999.
    """
    if not MIN_DATE_MS <= epoch_ms <= MAX_DATE_MS:
        raise ValueError(f"date {epoch_ms} ms since the epoch is outside the years 1 to 9999")
    return _EPOCH + timedelta(milliseconds=epoch_ms)


def date_to_ms(value: datetime) -> int:
    """Milliseconds since the epoch of a datetime (naive ones are taken as UTC), floored."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_date(inner: Any, *, require_offset: bool = True) -> datetime:
    """The datetime of a `$date` wrapper's value, in UTC, truncated to milliseconds.

    Accepts an ISO-8601 string (with an offset unless `require_offset` is false),
    `{"$numberLong": "<ms>"}`, or a number of milliseconds.

    Raises:
        ValueError: anything else, or a date outside the years 1 to 9999.
    """
    if isinstance(inner, str):
        parsed = datetime.fromisoformat(inner.strip())
        if parsed.tzinfo is None:
            if require_offset:
                raise ValueError("an Extended JSON date string carries an offset")
            parsed = parsed.replace(tzinfo=UTC)
        return date_from_ms(date_to_ms(parsed))
    if isinstance(inner, Mapping) and set(inner) == {"$numberLong"}:
        return date_from_ms(_long(inner["$numberLong"]))
    if isinstance(inner, int | float) and not isinstance(inner, bool):
        if inner != inner or inner in (float("inf"), float("-inf")):
            raise ValueError(f"invalid $date value: {inner!r}")
        return date_from_ms(int(inner))
    raise ValueError(f"invalid $date value: {inner!r}")


def format_date(value: datetime) -> str | dict[str, str]:
    """A date's relaxed Extended JSON value: ISO text in 1970-9999, `$numberLong` otherwise."""
    if not 1970 <= value.astimezone(UTC).year <= 9999:
        return {"$numberLong": str(date_to_ms(value))}
    return format_iso(value)


def format_iso(value: datetime) -> str:
    """`yyyy-MM-ddTHH:mm:ss.SSSZ` of a date in UTC (years 1 to 9999)."""
    utc = date_from_ms(date_to_ms(value))
    return f"{utc.year:04d}-{utc:%m-%dT%H:%M:%S}.{utc.microsecond // 1000:03d}Z"


def _long(text: Any) -> int:
    if not isinstance(text, str):
        raise ValueError(f"$numberLong takes a string, got {type(text).__name__}")
    return int(text)


def _binary(inner: Any) -> bytes:
    if not isinstance(inner, Mapping) or inner.get("subType") != "00":
        raise ValueError("only $binary with subType 00 is supported")
    return base64.b64decode(inner["base64"], validate=True)


def _decimal(text: Any) -> Decimal:
    try:
        return Decimal(text)
    except (InvalidOperation, TypeError) as exc:
        raise ValueError(f"invalid $numberDecimal value: {text!r}") from exc


_STORED: Final[dict[str, Callable[[Any], Any]]] = {
    "$date": parse_date,
    "$oid": ObjectId,
    "$binary": _binary,
}

_TYPED: Final[dict[str, Callable[[Any], Any]]] = {
    "$date": lambda inner: parse_date(inner, require_offset=False),
    "$oid": ObjectId,
    "$numberLong": lambda text: Int64(_long(text)),
    "$numberInt": int,
    "$numberDouble": float,
    "$numberDecimal": _decimal,
}


def from_relaxed_ejson(value: Any) -> Any:
    """Parsed relaxed Extended JSON (`$date`, `$oid`, `$binary`) to the stored form.

    An object that is not a valid wrapper (`{"$oid": "nothex"}`, a date without an offset or
    out of range) stays as it is: it is the user's data, not Extended JSON.
    """
    if isinstance(value, Mapping):
        return decode_stored_object({k: from_relaxed_ejson(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return [from_relaxed_ejson(v) for v in value]
    return value


def decode_stored_object(obj: dict[str, Any]) -> Any:
    """One object of the stored form: a valid single-key wrapper decoded, anything else kept.

    Usable as `json.loads(..., object_hook=decode_stored_object)`.
    """
    if len(obj) != 1:
        return obj
    key, inner = next(iter(obj.items()))
    decoder = _STORED.get(key)
    if decoder is None:
        return obj
    try:
        return decoder(inner)
    except (ValueError, TypeError, KeyError, InvalidId, OverflowError):
        return obj


def from_ejson(data: Any) -> Any:
    """Relaxed or canonical Extended JSON (already parsed by `json`) to MQL values.

    Raises:
        ValueError: a wrapper whose value is invalid (`{"$date": "garbage"}`).
    """
    if isinstance(data, dict):
        if len(data) == 1:
            key, inner = next(iter(data.items()))
            decoder = _TYPED.get(key)
            if decoder is not None:
                try:
                    return decoder(inner)
                except (InvalidId, TypeError, OverflowError) as exc:
                    raise ValueError(f"invalid {key} value: {inner!r}") from exc
        return {k: from_ejson(v) for k, v in data.items()}
    if isinstance(data, list):
        return [from_ejson(v) for v in data]
    return data
