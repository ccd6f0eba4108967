"""Serialising `$emit` Kafka messages (§3.7): value, key per `keyFormat`, headers, tombstones.

Pure Python (no Spark, no broker). Values arrive as relaxed Extended JSON (what the sink
sees: `Output.doc_json`, or a computed option value decoded from JSON). A value that cannot
be serialised raises `EmitValueError`: the writer sends that document to the DLQ.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bson import json_util
from bson.errors import BSONError

from pipeline_stages._documents.values import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    format_iso_date,
)


class EmitValueError(ValueError):
    """A per-document `$emit` value (key, header, tombstoneWhen) that cannot be used."""


def _binary(value: Any) -> bytes | None:
    """The bytes of a relaxed-EJSON binData (`{"$binary": {"base64", "subType"}}`), else None."""
    if isinstance(value, Mapping) and set(value) == {"$binary"}:
        inner = value["$binary"]
        text = inner.get("base64") if isinstance(inner, Mapping) else None
        if isinstance(text, str):
            return base64.b64decode(text)
    return None


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Mapping) and set(value) in ({"$numberLong"}, {"$numberInt"}):
        return int(next(iter(value.values())))
    return None


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if _binary(value) is not None:
        return "binData"
    return "object"


def encode_key(value: Any, key_format: str) -> bytes | None:
    """The message key for `value` per `keyFormat` (None/missing: no key).

    `int` and `long` are big-endian two's complement (4 and 8 bytes), as Atlas writes them;
    `json` is the relaxed Extended JSON text; `binData` needs a binData value.
    """
    if value is None:
        return None
    if key_format == "binData":
        raw = _binary(value)
        if raw is None:
            raise EmitValueError(
                f"key must be binData for keyFormat binData, got {_type_name(value)}"
            )
        return raw
    if key_format == "string":
        if not isinstance(value, str):
            raise EmitValueError(
                f"key must be a string for keyFormat string, got {_type_name(value)}"
            )
        return value.encode("utf-8")
    if key_format == "json":
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if key_format in ("int", "long"):
        number = _integer(value)
        low, high, layout = (
            (INT32_MIN, INT32_MAX, ">i") if key_format == "int" else (INT64_MIN, INT64_MAX, ">q")
        )
        if number is None or not low <= number <= high:
            raise EmitValueError(
                f"key must be an {key_format} for keyFormat {key_format}, got {_type_name(value)}"
                + (f" {number}" if number is not None else "")
            )
        return struct.pack(layout, number)
    raise EmitValueError(f"unknown keyFormat {key_format!r}")


def _header_value(value: Any) -> bytes | None:
    if value is None:
        return None
    raw = _binary(value)
    if raw is not None:
        return raw
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("utf-8")


def encode_headers(value: Any) -> list[tuple[str, bytes | None]]:
    """User headers from `config.headers`: an object `{name: value}` or `[{k, v}, ...]`.

    Strings are sent as UTF-8, binData as its bytes, null as a null header value, anything
    else as its relaxed Extended JSON text.
    """
    if value is None:
        return []
    if isinstance(value, Mapping) and _binary(value) is None:
        return [(str(k), _header_value(v)) for k, v in value.items()]
    if isinstance(value, list):
        out = []
        for entry in value:
            if not (isinstance(entry, Mapping) and isinstance(entry.get("k"), str)):
                raise EmitValueError("headers array entries must be {k: <string>, v: <value>}")
            out.append((entry["k"], _header_value(entry.get("v"))))
        return out
    raise EmitValueError(f"headers must evaluate to an object or an array, got {_type_name(value)}")


def tombstone(value: Any) -> bool:
    """Whether `tombstoneWhen` asks for a tombstone (it must be a boolean when set)."""
    if value is None:
        return False
    if not isinstance(value, bool):
        raise EmitValueError(f"tombstoneWhen must evaluate to a boolean, got {_type_name(value)}")
    return value


def _iso_dates(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"$date"} and isinstance(value["$date"], str):
            return value["$date"]
        return {k: _iso_dates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_iso_dates(v) for v in value]
    return value


def _datetimes_to_iso(value: Any) -> Any:
    if isinstance(value, datetime):
        return format_iso_date(value)
    if isinstance(value, dict):
        return {k: _datetimes_to_iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_datetimes_to_iso(v) for v in value]
    return value


def encode_value(doc_json: str, *, output_format: str, date_format: str) -> bytes:
    """The message value: relaxed (as the sink got it) or canonical Extended JSON; with
    `dateFormat: "ISO8601"` dates are plain ISO-8601 strings instead of `{"$date": ...}`.

    Raises:
        EmitValueError: The document cannot be encoded so (a value the codec refuses, a date
            outside what it holds, nesting deeper than it decodes): a document's fault.
    """
    try:
        return _encode_value(doc_json, output_format=output_format, date_format=date_format)
    except (ValueError, TypeError, ArithmeticError, RecursionError, KeyError, BSONError) as error:
        raise EmitValueError(
            f"the document cannot be written as {output_format} ({type(error).__name__}: "
            f"{str(error)[:200]})"
        ) from None


def _encode_value(doc_json: str, *, output_format: str, date_format: str) -> bytes:
    if output_format == "relaxedJson" and date_format == "default":
        return doc_json.encode("utf-8")
    if output_format == "canonicalJson":
        options = json_util.JSONOptions(
            json_mode=json_util.JSONMode.CANONICAL, tz_aware=True, tzinfo=UTC
        )
        doc = json_util.loads(doc_json, json_options=options)
        if date_format == "ISO8601":
            doc = _datetimes_to_iso(doc)
        return json_util.dumps(doc, json_options=options).encode("utf-8")
    return json.dumps(_iso_dates(json.loads(doc_json)), allow_nan=False).encode("utf-8")
