"""MQL values in plain Python, for the operators that run Python per document.

The Spark side carries MQL values in VARIANT columns (`values.py`); the Python-side window
operator, its accumulators and the reference executor of the conformance suite hold them as
ordinary Python objects:

| MQL               | Python                                                      |
|-------------------|-------------------------------------------------------------|
| missing           | the `MISSING` sentinel (never stored inside documents)      |
| null              | `None`                                                      |
| int / long        | `int` (`bson.Int64` is also accepted as a long)             |
| double            | `float`                                                     |
| decimal           | `decimal.Decimal`                                           |
| string, bool      | `str`, `bool`                                               |
| object, array     | `dict` (insertion-ordered), `list`                          |
| date              | tz-aware UTC `datetime`, truncated to milliseconds          |
| objectId          | `bson.ObjectId`                                             |

Relaxed Extended JSON is the wire form (`{"$date": "...Z"}` etc.), matching what the Spark
encoding and the sinks print. Nothing here imports Spark, so this module is safe to use inside
pandas UDFs and in the pure-Python test executor.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import cmp_to_key
from typing import Any, Final

from bson import Int64, MaxKey, MinKey, ObjectId, Timestamp

from pipeline_stages._documents.ejson import date_to_ms as to_epoch_ms
from pipeline_stages._documents.ejson import format_date


class _Missing:
    """The MQL "missing" value: a field that does not exist (distinct from null)."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()

INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

#: BSON cross-type order (same table as `values.TYPE_RANK`, duplicated because that module
#: imports pyspark and this one must not).
TYPE_RANK: Final[dict[str, int]] = {
    "minKey": 0,
    "missing": 1,
    "null": 1,
    "int": 2,
    "long": 2,
    "double": 2,
    "decimal": 2,
    "string": 3,
    "object": 4,
    "array": 5,
    "binData": 6,
    "objectId": 7,
    "bool": 8,
    "date": 9,
    "timestamp": 10,
    "regex": 11,
    "maxKey": 12,
}

NUMERIC_TYPES: Final = frozenset({"int", "long", "double", "decimal"})

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


class MqlError(Exception):
    """A per-document MQL evaluation error (the document goes to the DLQ, the stream goes on).

    The message is MongoDB's wording, so DLQ reasons read like Atlas's.
    """


# --------------------------------------------------------------------------- types


def mql_type(value: Any) -> str:
    """The MQL type name of a Python value, as `$type` reports it (`"missing"` for MISSING)."""
    if value is MISSING:
        return "missing"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Int64):
        return "long"
    if isinstance(value, int):
        return "int" if INT32_MIN <= value <= INT32_MAX else "long"
    if isinstance(value, float):
        return "double"
    return _OTHER_TYPES.get(type(value)) or _slow_type(value)


_OTHER_TYPES: Final[dict[type, str]] = {
    str: "string",
    dict: "object",
    list: "array",
    tuple: "array",
    datetime: "date",
    Decimal: "decimal",
    ObjectId: "objectId",
    bytes: "binData",
    Timestamp: "timestamp",
    re.Pattern: "regex",
    MinKey: "minKey",
    MaxKey: "maxKey",
}


def _slow_type(value: Any) -> str:
    for kind, name in _OTHER_TYPES.items():
        if isinstance(value, kind):
            return name
    raise TypeError(f"not an MQL value: {value!r} ({type(value).__name__})")


def is_number(value: Any) -> bool:
    """True for int, long, double and decimal values (bools are not numbers in MQL)."""
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def is_nullish(value: Any) -> bool:
    """True for null and missing."""
    return value is None or value is MISSING


def truthy(value: Any) -> bool:
    """MQL truthiness: false, null, missing and numeric zero are false; all else is true.

    NaN is true, as in MongoDB (`NaN != 0`); empty strings, arrays and objects are true.
    """
    if value is None or value is MISSING or value is False:
        return False
    if is_number(value):
        return bool(value != 0)
    return True


# --------------------------------------------------------------------------- dates


def to_datetime_ms(epoch_ms: int) -> datetime:
    """The UTC datetime of a millisecond timestamp (works before 1970 and past 2038)."""
    return _EPOCH + timedelta(milliseconds=epoch_ms)


def truncate_ms(value: datetime) -> datetime:
    """The datetime in UTC with sub-millisecond precision dropped (BSON dates are ms)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return to_datetime_ms(to_epoch_ms(value))


def parse_iso_date(text: str) -> datetime:
    """Parse an ISO-8601 date string (`Z` or an offset; date-only means midnight UTC).

    Raises:
        ValueError: the string is not an ISO-8601 date.
    """
    parsed = datetime.fromisoformat(text.strip())
    return truncate_ms(parsed)


def format_iso_date(value: datetime) -> str:
    """`yyyy-MM-ddTHH:mm:ss.SSSZ`, the relaxed Extended JSON form of a date."""
    value = truncate_ms(value)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- Extended JSON


def to_ejson(value: Any) -> Any:
    """Encode MQL values as relaxed Extended JSON that `json.dumps` accepts.

    Non-finite doubles use `{"$numberDouble": ...}` so the output is strict JSON; missing
    values inside documents are dropped (a missing field is simply absent).
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {
            "$numberDouble": "NaN"
            if math.isnan(value)
            else ("Infinity" if value > 0 else "-Infinity")
        }
    if isinstance(value, dict):
        return {k: to_ejson(v) for k, v in value.items() if v is not MISSING}
    if isinstance(value, list | tuple):
        return [None if v is MISSING else to_ejson(v) for v in value]
    if isinstance(value, datetime):
        return {"$date": format_date(value)}
    if isinstance(value, ObjectId):
        return {"$oid": str(value)}
    if isinstance(value, Decimal):
        return {"$numberDecimal": str(value)}
    raise TypeError(f"cannot encode {type(value).__name__} as Extended JSON")


# --------------------------------------------------------------------------- comparison


def compare(left: Any, right: Any) -> int:
    """BSON comparison: -1, 0 or 1 (`$sort`, `$min`/`$max`, `$cmp`, equality).

    Types are ordered by `TYPE_RANK`; numbers compare by value across int/long/double/decimal
    (NaN equals NaN and sorts below every other number); null and missing compare equal;
    objects compare field by field (field type, then name, then value) and arrays element by
    element, the shorter prefix first.
    """
    key_left, key_right = sort_key(left), sort_key(right)
    return (key_left > key_right) - (key_left < key_right)


def sort_key(value: Any) -> tuple[Any, ...]:
    """A key with the BSON order, usable with `sorted`, `min` and as a dict key.

    Equal keys mean equal MQL values (`1`, `1.0` and `Decimal("1")` share one key), so the key
    also serves for grouping (`$group`) and de-duplication (`$addToSet`).
    """
    kind = mql_type(value)
    rank = TYPE_RANK[kind]
    if kind in NUMERIC_TYPES:
        if value != value:  # NaN; Decimal NaN included
            return (rank, 0)
        return (rank, 1, value)
    maker = _KEY_MAKERS.get(kind)
    return (rank,) if maker is None else (rank, maker(value))


def _object_key(value: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(
        (TYPE_RANK[mql_type(v)], k, sort_key(v)) for k, v in value.items() if v is not MISSING
    )


_KEY_MAKERS: Final[dict[str, Any]] = {
    "string": lambda v: v,
    "object": _object_key,
    "array": lambda v: tuple(sort_key(None if e is MISSING else e) for e in v),
    "binData": lambda v: (len(v), bytes(v)),
    "objectId": lambda v: v.binary,
    "bool": lambda v: v,
    "date": to_epoch_ms,
    "timestamp": lambda v: (v.time, v.inc),
    "regex": lambda v: (v.pattern, v.flags),
}


def values_equal(left: Any, right: Any) -> bool:
    """MQL equality (`$eq` semantics, numbers by value across types)."""
    return sort_key(left) == sort_key(right)


def cmp_key() -> Any:
    """A `functools.cmp_to_key` wrapper of `compare`, for APIs that want a comparator."""
    return cmp_to_key(compare)


# --------------------------------------------------------------------------- documents


def get_path(doc: Any, path: str) -> Any:
    """The value at a dotted path, MISSING when absent.

    Arrays along the path are traversed like MongoDB field paths do (`"a.b"` on
    `{a: [{b: 1}, {b: 2}]}` gives `[1, 2]`); elements without the field are skipped.
    """
    current: Any = doc
    for part in path.split("."):
        current = _step(current, part)
        if current is MISSING:
            return MISSING
    return current


def _step(value: Any, part: str) -> Any:
    if isinstance(value, dict):
        return value.get(part, MISSING)
    if isinstance(value, list):
        out = [_step(e, part) for e in value if isinstance(e, dict | list)]
        return [v for v in out if v is not MISSING]
    return MISSING


def set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path in place, creating (or replacing non-object) parents as `$set` does."""
    parts = path.split(".")
    current = doc
    for part in parts[:-1]:
        child = current.get(part)
        if not isinstance(child, dict):
            child = {}
            current[part] = child
        current = child
    if value is MISSING:
        current.pop(parts[-1], None)
    else:
        current[parts[-1]] = value


def unset_path(doc: dict[str, Any], path: str) -> None:
    """Remove a dotted path in place (no-op when absent)."""
    parts = path.split(".")
    current: Any = doc
    for part in parts[:-1]:
        current = current.get(part) if isinstance(current, dict) else None
        if not isinstance(current, dict):
            return
    current.pop(parts[-1], None)


def type_name_for_error(value: Any) -> str:
    """The type name MongoDB prints in error messages (`missing` and `null` included)."""
    return mql_type(value)


def repr_for_error(value: Any) -> str:
    """A value printed the way MongoDB's `Value::toString` does, for error messages."""
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "null"
    if value is MISSING:
        return "MISSING"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return format_iso_date(value)
    if isinstance(value, list):
        return "[" + ", ".join(repr_for_error(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{k}: {repr_for_error(v)}" for k, v in value.items())
        return "{" + inner + "}" if inner else "{}"
    return str(value)
