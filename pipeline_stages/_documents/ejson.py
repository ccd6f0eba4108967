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
not be able to stop a query. The years 1 to 9999 are Sluice's date range everywhere: Spark's
own (years 0 to 294247) is wider, so the language reads a date outside it as invalid too
(`_mql.values.timestamp_from_ms`).

`wrapper_problem` and `invalid_wrapper` say why an object is not valid Extended JSON for
one of the wrapper keys Sluice reads (`WRAPPER_KEYS`); sources send such a document to the
DLQ with that reason (`_connectors.sources.records`), and sinks decode with
`from_relaxed_ejson(..., strict=True)`, which raises it instead of keeping the object.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from bson import Int64, ObjectId
from bson.errors import InvalidId

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
#: The milliseconds of 0001-01-01 and of 9999-12-31T23:59:59.999, Python's date range.
MIN_DATE_MS: Final = -62_135_596_800_000
MAX_DATE_MS: Final = 253_402_300_799_999
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
#: Decimal128's largest adjusted exponent (IEEE 754-2008 decimal128: Emax = 6144).
DECIMAL128_MAX_EXPONENT: Final = 6144

#: The Extended JSON wrapper keys Sluice reads: the stores (`$date`, `$oid`, `$binary`), Spark's
#: type tags (`$date`, `$oid`, `$numberDecimal`, `$numberLong`) and the window runtime (these
#: and `$numberInt`, `$numberDouble`).
WRAPPER_KEYS: Final = frozenset(
    {"$date", "$oid", "$binary", "$numberLong", "$numberInt", "$numberDouble", "$numberDecimal"}
)


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


# --------------------------------------------------------------------------- validation

_INTEGER = re.compile(r"-?\d+\Z")
_HEX_24 = re.compile(r"[0-9a-fA-F]{24}\Z")
_SUBTYPE = re.compile(r"[0-9a-fA-F]{1,2}\Z")


def _shown(value: Any, limit: int = 60) -> str:
    """A short JSON rendering of a value for a reason text; never raises, and is UTF-8 (a
    lone surrogate is written as its escape)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    text = _utf8(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _utf8(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _integer_problem(text: Any, key: str, low: int, high: int, what: str) -> str | None:
    if not isinstance(text, str):
        return f"{key} takes a string of digits, got {_shown(text)}"
    if not _INTEGER.match(text):
        return f"{key} {_shown(text)} is not an integer"
    if not low <= int(text) <= high:
        return f"{key} {_shown(text)} is outside the {what} range"
    return None


def _millis_problem(millis: int, shown: str) -> str | None:
    if not MIN_DATE_MS <= millis <= MAX_DATE_MS:
        return f"$date {shown} is outside the years 1 to 9999"
    return None


def date_problem(inner: Any) -> str | None:
    """Why `inner` is no valid `$date` wrapper value (`{"$date": inner}`); None if it is."""
    if isinstance(inner, str):
        try:
            parsed = datetime.fromisoformat(inner.strip())
        except ValueError:
            return f"$date {_shown(inner)} is not an ISO-8601 date"
        if parsed.tzinfo is not None and parsed.utcoffset() is not None:
            try:
                parsed.astimezone(UTC)
            except OverflowError:
                return f"$date {_shown(inner)} is outside the years 1 to 9999"
        return None
    shown = _shown(inner)
    if isinstance(inner, Mapping) and set(inner) == {"$numberLong"}:
        text = inner["$numberLong"]
        if _integer_problem(text, "$numberLong", INT64_MIN, INT64_MAX, "64-bit") is not None:
            return f"$date {shown} is not a 64-bit integer number of milliseconds"
        return _millis_problem(int(text), shown)
    if isinstance(inner, bool) or not isinstance(inner, int | float):
        return (
            '$date takes an ISO-8601 string, {"$numberLong": "<milliseconds>"} or a number of '
            f"milliseconds, got {shown}"
        )
    if isinstance(inner, float) and not inner.is_integer():
        return f"$date {shown} is not a whole number of milliseconds"
    return _millis_problem(int(inner), shown)


def _oid_problem(inner: Any) -> str | None:
    if isinstance(inner, str) and _HEX_24.match(inner):
        return None
    return f"$oid takes 24 hexadecimal digits, got {_shown(inner)}"


def _binary_problem(inner: Any) -> str | None:
    if not isinstance(inner, Mapping) or set(inner) != {"base64", "subType"}:
        return f'$binary takes {{"base64": <text>, "subType": <hex>}}, got {_shown(inner)}'
    return _base64_problem(inner["base64"], inner["subType"])


def _base64_problem(data: Any, subtype: Any) -> str | None:
    if not isinstance(subtype, str) or not _SUBTYPE.match(subtype):
        return f"$binary subType {_shown(subtype)} is not one or two hexadecimal digits"
    if not isinstance(data, str):
        return f"$binary base64 takes a string, got {_shown(data)}"
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"$binary base64 {_shown(data)} is not base64"
    return None


def _double_problem(inner: Any) -> str | None:
    if isinstance(inner, str):
        try:
            float(inner)
        except ValueError:
            pass
        else:
            return None
    return f"$numberDouble takes a number as a string, got {_shown(inner)}"


def _decimal_problem(inner: Any) -> str | None:
    if not isinstance(inner, str):
        return f"$numberDecimal takes a string, got {_shown(inner)}"
    try:
        value = Decimal(inner)
    except InvalidOperation:
        return f"$numberDecimal {_shown(inner)} is not a decimal number"
    if value.is_finite() and value != 0 and value.adjusted() > DECIMAL128_MAX_EXPONENT:
        return f"$numberDecimal {_shown(inner)} is outside the range of a 128-bit decimal"
    return None


_PROBLEMS: Final[dict[str, Callable[[Any], str | None]]] = {
    "$date": date_problem,
    "$oid": _oid_problem,
    "$binary": _binary_problem,
    "$numberLong": lambda t: _integer_problem(t, "$numberLong", INT64_MIN, INT64_MAX, "64-bit"),
    "$numberInt": lambda t: _integer_problem(t, "$numberInt", INT32_MIN, INT32_MAX, "32-bit"),
    "$numberDouble": _double_problem,
    "$numberDecimal": _decimal_problem,
}


def wrapper_problem(obj: Mapping[str, Any]) -> str | None:
    """Why `obj` is not valid Extended JSON for a wrapper key it holds; None when it holds
    none of `WRAPPER_KEYS` or is a valid wrapper.

    A wrapper is an object with exactly one key (`$binary` also takes the legacy
    `{"$binary": <base64>, "$type": <hex>}`).
    """
    found = [key for key in obj if key in WRAPPER_KEYS]
    if not found:
        return None
    key = found[0]
    if key == "$binary" and set(obj) == {"$binary", "$type"}:
        return _base64_problem(obj["$binary"], obj["$type"])
    if len(obj) != 1:
        others = _utf8(", ".join(sorted(k for k in obj if k != key)))
        return f"{key} takes no other fields, got {others}"
    return _PROBLEMS[key](obj[key])


def _escape(token: str) -> str:
    return _utf8(token.replace("~", "~0").replace("/", "~1"))


#: What parsed JSON holds besides objects and arrays.
_LEAVES = (str, int, float, type(None))
#: Where an object sits: the keys and indexes from the root, innermost last (a linked list, so
#: that a step costs one tuple and the pointer text is only built for the object reported).
_Steps = tuple[Any, "_Steps"] | None


def _walk_objects(value: Any) -> Iterator[tuple[_Steps, Mapping[str, Any]]]:
    """Every object inside `value` (depth first, in document order) with where it sits,
    without recursion (any depth)."""
    stack: list[tuple[_Steps, Any]] = [(None, value)]
    while stack:
        steps, item = stack.pop()
        if isinstance(item, _LEAVES):  # most values; the `Mapping` test is an ABC's, slower
            continue
        if isinstance(item, dict | Mapping):
            yield steps, item
            stack.extend(((k, steps), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, list | tuple):
            stack.extend(((i, steps), v) for i, v in reversed(list(enumerate(item))))


def _pointer(steps: _Steps) -> str:
    """The JSON pointer of `_walk_objects`' steps (`/` for the root)."""
    parts: list[str] = []
    while steps is not None:
        step, steps = steps
        parts.append(str(step) if isinstance(step, int) else _escape(str(step)))
    return "/" + "/".join(reversed(parts))


def invalid_wrapper(value: Any) -> tuple[str, str] | None:
    """`(JSON pointer, problem)` of the first invalid Extended JSON wrapper inside `value`
    (parsed JSON), or None."""
    for steps, obj in _walk_objects(value):
        problem = wrapper_problem(obj)
        if problem is not None:
            return _pointer(steps), problem
    return None


class InvalidExtendedJson(ValueError):
    """A document holds an object that is no valid Extended JSON wrapper (see `path`)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"invalid Extended JSON at {path}: {problem}")
        self.path = path
        self.problem = problem


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


def from_relaxed_ejson(value: Any, *, strict: bool = False) -> Any:
    """Parsed relaxed Extended JSON (`$date`, `$oid`, `$binary`) to the stored form.

    An object that is not a valid wrapper (`{"$oid": "nothex"}`, a date without an offset or
    out of range) stays as it is: it is the user's data, not Extended JSON. With `strict`
    (what the sinks use), such an object raises `InvalidExtendedJson` instead, and a `$date`
    string without an offset is read in UTC, as Spark reads it.
    """
    if strict:
        found = invalid_wrapper(value)
        if found is not None:
            raise InvalidExtendedJson(*found)
        return _strict_stored(value)
    if isinstance(value, Mapping):
        return decode_stored_object({k: from_relaxed_ejson(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return [from_relaxed_ejson(v) for v in value]
    return value


def _strict_stored(value: Any) -> Any:
    if isinstance(value, Mapping):
        obj = {k: _strict_stored(v) for k, v in value.items()}
        if len(obj) == 1 and "$date" in obj:
            return parse_date(obj["$date"], require_offset=False)
        return decode_stored_object(obj)
    if isinstance(value, list | tuple):
        return [_strict_stored(v) for v in value]
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
