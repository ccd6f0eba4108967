"""Value rules shared by every store: the in-memory document form and its JSON encodings.

**In-memory form** (what stores accept and return): plain Python documents built from ``dict``
(``str`` keys, order kept), ``list``, ``str``, ``int``, ``float``, ``bool``, ``None``, plus three
BSON types: timezone-aware ``datetime`` (returned in UTC), ``bson.ObjectId`` and ``bytes``
(binary subtype 0). Naive datetimes are rejected because MongoDB silently reads them as UTC
and an embedded store would compare them wrongly (mongo-options.md §2.1). Datetimes are
truncated to milliseconds on write, in every store, because BSON dates hold milliseconds.

**Storage JSON** (SQLite columns) is relaxed Extended JSON for the three BSON types:
``{"$date": "2024-01-01T00:00:00.123Z"}`` (``{"$date": {"$numberLong": "<ms>"}}`` outside
years 1970-9999, as the EJSON spec says), ``{"$oid": "<24 hex>"}`` and
``{"$binary": {"base64": "...", "subType": "00"}}``. A user value that is literally such a
one-key object decodes as the BSON type; MongoDB's own tools have the same ambiguity.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId
from bson.regex import Regex

from pipeline_stages._documents.ejson import decode_stored_object, format_date

from .errors import InvalidDocument, InvalidQuery

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_SCALARS = (str, int, float, bool, type(None), ObjectId, bytes)

#: Filter operators never sent to a store: they run server-side JavaScript.
FORBIDDEN_FILTER_OPERATORS = frozenset({"$where", "$function", "$accumulator"})


def utc_ms(value: datetime, *, path: str = "") -> datetime:
    """Returns ``value`` in UTC truncated to milliseconds (BSON precision).

    Args:
        value: A timezone-aware datetime.
        path: Where the value sits, for the error.

    Raises:
        InvalidDocument: If ``value`` is naive.
    """
    if value.tzinfo is None or value.utcoffset() is None:
        msg = f"naive datetime {value.isoformat()} is not allowed; attach a timezone (UTC)"
        raise InvalidDocument(msg, path=path, code="naive_datetime")
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


def to_epoch_ms(value: datetime) -> int:
    """Milliseconds since the Unix epoch of an aware datetime (floored like BSON)."""
    return (utc_ms(value) - _EPOCH) // _MS


def from_epoch_ms(ms: int) -> datetime:
    """The UTC datetime ``ms`` milliseconds after the Unix epoch."""
    return _EPOCH + timedelta(milliseconds=ms)


def normalize_document(value: Any, *, path: str = "") -> Any:
    """Validates a document in the in-memory form and returns a normalised copy.

    Datetimes become UTC with millisecond precision; tuples become lists.

    Raises:
        InvalidDocument: On a naive datetime, a non-string key or an unsupported value type.
    """
    return _walk(value, path, _normalize_leaf)


def normalize_filter(query: Mapping[str, Any] | None, *, path: str = "/filter") -> dict[str, Any]:
    """Validates an MQL filter: aware datetimes only, no server-side JavaScript operators.

    Compiled regular expressions are allowed as values, as in pymongo.

    Raises:
        InvalidQuery: If the filter is not an object, has a naive datetime or a forbidden
            operator.
    """
    if query is None:
        return {}
    if not isinstance(query, Mapping):
        raise InvalidQuery("the filter must be an object", path=path)
    _reject_operators(query, path)
    try:
        checked: dict[str, Any] = _walk(dict(query), path, _filter_leaf)
    except InvalidDocument as exc:
        raise InvalidQuery(exc.message, path=exc.path, code=exc.code) from None
    return checked


def to_storage_json(value: Any, *, path: str = "") -> str:
    """Encodes an in-memory document as compact relaxed-EJSON text (validating it first)."""
    return encode_normalized(normalize_document(value, path=path))


def encode_normalized(value: Any) -> str:
    """Like :func:`to_storage_json` for a value :func:`normalize_document` already returned.

    Skips the second validation walk: the JSON encoder calls back only for the BSON types.
    """
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)


def from_storage_json(text: str) -> Any:
    """Decodes text written by :func:`to_storage_json` back to the in-memory form."""
    return json.loads(text, object_hook=decode_stored_object)


def to_relaxed_ejson(value: Any, *, path: str = "") -> Any:
    """Converts an in-memory document to JSON-able relaxed Extended JSON (dates as ``$date``)."""
    return _walk(value, path, _encode_leaf)


def canonical_key(value: Any) -> str:
    """A string equal for two values exactly when MongoDB's equality match treats them as equal.

    Numbers compare by value across int and float (``1 == 1.0``), booleans stay distinct from
    numbers, object key order matters, as in BSON.
    """
    return json.dumps(_walk(value, "", _canonical_leaf), separators=(",", ":"), ensure_ascii=False)


def object_id_key(oid: str) -> str:
    """`canonical_key` of the ObjectId whose hex is `oid`, without the walk (per document on
    the sinks' bulk path). Raises `bson.errors.InvalidId` for text that is not 24 hex digits."""
    return '{"$oid":"' + str(ObjectId(oid)) + '"}'


def _walk(value: Any, path: str, leaf: Callable[[Any, str], Any]) -> Any:
    """Applies ``leaf`` to every non-container value; errors get ``path`` + the inner path."""
    try:
        return _walk_inner(value, leaf)
    except InvalidDocument as exc:
        exc.path = path + exc.path
        raise


def _walk_inner(value: Any, leaf: Callable[[Any, str], Any]) -> Any:
    # Hot path (every stored value passes here): exact type checks before ABC isinstance,
    # and error paths are built only while an error propagates, never on success.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict or (kind is not float and isinstance(value, Mapping)):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                msg = f"object keys must be strings, got {type(key).__name__} {key!r}"
                raise InvalidDocument(msg)
            try:
                out[key] = _walk_inner(item, leaf)
            except InvalidDocument as exc:
                exc.path = f"/{key}{exc.path}"
                raise
        return out
    if kind is list or kind is tuple:
        items: list[Any] = []
        for i, item in enumerate(value):
            try:
                items.append(_walk_inner(item, leaf))
            except InvalidDocument as exc:
                exc.path = f"/{i}{exc.path}"
                raise
        return items
    return leaf(value, "")


def _normalize_leaf(value: Any, path: str) -> Any:
    if isinstance(value, datetime):
        return utc_ms(value, path=path)
    if isinstance(value, _SCALARS):
        return value
    msg = f"unsupported value type {type(value).__name__}; use JSON types, datetime, ObjectId"
    raise InvalidDocument(msg, path=path, code="unsupported_type")


def _reject_operators(value: Any, path: str) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key in FORBIDDEN_FILTER_OPERATORS:
                msg = f"operator {key} is not allowed: it runs server-side JavaScript"
                raise InvalidQuery(msg, path=f"{path}/{key}", code="forbidden_operator")
            _reject_operators(item, f"{path}/{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _reject_operators(item, f"{path}/{i}")


def _filter_leaf(value: Any, path: str) -> Any:
    if isinstance(value, re.Pattern | Regex):
        return value
    return _normalize_leaf(value, path)


def _encode_leaf(value: Any, path: str) -> Any:
    value = _normalize_leaf(value, path)
    if isinstance(value, datetime):
        return {"$date": format_date(value)}
    if isinstance(value, ObjectId):
        return {"$oid": str(value)}
    if isinstance(value, bytes):
        return {"$binary": {"base64": base64.b64encode(value).decode("ascii"), "subType": "00"}}
    return value


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | ObjectId | bytes):
        return _encode_leaf(value, "")
    raise TypeError(f"{type(value).__name__} is not storable")


def _canonical_leaf(value: Any, path: str) -> Any:
    value = _normalize_leaf(value, path)
    if isinstance(value, float):
        if math.isnan(value):
            return {"$numberDouble": "NaN"}
        if value.is_integer() and abs(value) < 2**63:
            return int(value)
    if isinstance(value, datetime):
        return {"$date": to_epoch_ms(value)}
    return _encode_leaf(value, path)
