"""Query operands: JSON values (with Extended JSON wrappers) classified at compile time.

Filters arrive as plain JSON, so BSON types that JSON lacks come as relaxed/canonical
Extended JSON wrappers: `{"$date": ...}`, `{"$oid": ...}`, `{"$numberLong": ...}`,
`{"$numberInt": ...}`, `{"$numberDouble": ...}`, `{"$numberDecimal": ...}` and
`{"$regularExpression": {"pattern", "options"}}`. A single-key object with one of these keys
is a literal of that type, never an operator object or a sub-document.

Regular expressions run on Java's `java.util.regex` (Spark's `rlike`), not PCRE: the common
syntax agrees, and patterns Java cannot compile are rejected here so that no query can fail at
run time. Options `i`, `m`, `s`, `x` map to Java's embedded flags; `u` is accepted and ignored.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import values as V
from pipeline_stages._mql.names import QUERY_EJSON_KEYS

Kind = Literal["null", "number", "string", "bool", "date", "objectId", "object", "array", "regex"]

#: Single-key objects that spell a BSON scalar in Extended JSON.
EJSON_KEYS = QUERY_EJSON_KEYS

REGEX_OPTIONS = "imsxu"
_JAVA_FLAGS = {"i": "iu", "m": "m", "s": "s", "x": "x", "u": ""}
_HEX24 = re.compile(r"^[0-9a-fA-F]{24}$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class BadLiteral(ValueError):
    """A malformed operand; the message is user-facing."""


@dataclass(frozen=True)
class Regex:
    """A validated regular expression: the Java pattern (options folded in as flags)."""

    pattern: str
    options: str

    @property
    def java(self) -> str:
        """The pattern with its options as Java embedded flags."""
        flags = "".join(_JAVA_FLAGS[o] for o in sorted(set(self.options)))
        return f"(?{flags}){self.pattern}" if flags else self.pattern


@dataclass(frozen=True)
class QueryLiteral:
    """A classified operand.

    `value` holds: `int | float` for numbers, `str` for strings, `bool`, epoch milliseconds
    for dates, lower-case hex for ObjectIds, canonical JSON text for objects and arrays, a
    `Regex` for regular expressions, None for null.
    """

    kind: Kind
    value: Any


def is_ejson(value: Any) -> bool:
    """True when `value` is an Extended JSON scalar wrapper such as `{"$date": ...}`."""
    return isinstance(value, dict) and len(value) == 1 and next(iter(value)) in EJSON_KEYS


def parse_literal(value: Any) -> QueryLiteral:
    """Classify a JSON operand. Raises `BadLiteral` for malformed Extended JSON."""
    if value is None:
        return QueryLiteral("null", None)
    if isinstance(value, bool):
        return QueryLiteral("bool", value)
    if isinstance(value, int | float):
        return QueryLiteral("number", value)
    if isinstance(value, str):
        return QueryLiteral("string", value)
    if isinstance(value, list):
        return QueryLiteral("array", _json_text(value))
    if isinstance(value, dict):
        if is_ejson(value):
            return _parse_ejson(*next(iter(value.items())))
        return QueryLiteral("object", _json_text(value))
    raise BadLiteral(f"unsupported value {value!r}")


def _parse_ejson(key: str, body: Any) -> QueryLiteral:
    if key == "$date":
        return QueryLiteral("date", date_millis(body))
    if key == "$oid":
        if not isinstance(body, str) or not _HEX24.match(body):
            raise BadLiteral("$oid must be a string of 24 hexadecimal digits")
        return QueryLiteral("objectId", body.lower())
    if key == "$regularExpression":
        if not isinstance(body, dict) or not isinstance(body.get("pattern"), str):
            raise BadLiteral("$regularExpression needs {pattern: <string>, options: <string>}")
        return QueryLiteral("regex", make_regex(body["pattern"], body.get("options", "")))
    return QueryLiteral("number", _ejson_number(key, body))


def _ejson_number(key: str, body: Any) -> int | float:
    if not isinstance(body, str):
        raise BadLiteral(f"{key} must be a string")
    try:
        if key in ("$numberLong", "$numberInt"):
            return int(body)
        number = float(body)
    except ValueError:
        raise BadLiteral(f"{key} value {body!r} is not a number") from None
    return int(number) if key == "$numberDecimal" and number.is_integer() else number


def date_millis(body: Any) -> int:
    """Epoch milliseconds of a `$date` body (ISO string, epoch ms, or `{$numberLong}`)."""
    if isinstance(body, dict) and set(body) == {"$numberLong"}:
        body = body["$numberLong"]
        if isinstance(body, str) and body.lstrip("-").isdigit():
            return int(body)
    if isinstance(body, int | float) and not isinstance(body, bool) and math.isfinite(body):
        return int(body)
    if isinstance(body, str):
        try:
            parsed = datetime.fromisoformat(body)
        except ValueError:
            raise BadLiteral(f"$date value {body!r} is not an ISO-8601 date") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return (parsed - _EPOCH) // timedelta(milliseconds=1)
    raise BadLiteral("$date must be an ISO-8601 string or milliseconds since the epoch")


def _normalise(value: Any) -> Any:
    """Nested literal values in the form documents carry them (dates as ISO `$date`)."""
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1 and "$date" in value:
            millis = date_millis(value["$date"])
            iso = datetime.fromtimestamp(millis / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S")
            return {"$date": f"{iso}.{millis % 1000:03d}Z"}
        return {k: _normalise(v) for k, v in value.items()}
    return value


def _json_text(value: Any) -> str:
    try:
        return json.dumps(_normalise(value), allow_nan=False)
    except ValueError:
        raise BadLiteral("NaN and Infinity cannot appear inside documents or arrays") from None


def make_regex(pattern: Any, options: Any) -> Regex:
    """Validate a pattern and its options. Raises `BadLiteral`."""
    if not isinstance(pattern, str):
        raise BadLiteral("$regex has to be a string")
    if not isinstance(options, str):
        raise BadLiteral("$options has to be a string")
    bad = [o for o in options if o not in REGEX_OPTIONS]
    if bad:
        raise BadLiteral(f"invalid flag in regex options: {bad[0]}")
    if "\0" in pattern:
        raise BadLiteral("Regular expression cannot contain an embedded null byte")
    regex = Regex(pattern, options)
    problem = java_regex_error(regex.java)
    if problem is not None:
        raise BadLiteral(f"Regular expression is invalid: {problem}")
    return regex


def java_regex_error(pattern: str) -> str | None:
    """Why Java cannot compile `pattern` (None when it can).

    Uses the running JVM when there is one, since Spark compiles the pattern there and an
    invalid one would fail the whole query; otherwise Python's `re` approximates it.
    """
    context = SparkContext._active_spark_context
    if context is not None and context._jvm is not None:
        try:
            context._jvm.java.util.regex.Pattern.compile(pattern)
        except Exception as exc:  # py4j wraps PatternSyntaxException
            return _first_line(str(exc))
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        return str(exc)
    return None


def _first_line(message: str) -> str:
    for line in message.splitlines():
        if "PatternSyntaxException" in line:
            return line.split("PatternSyntaxException:", 1)[-1].strip()
    return message.strip().splitlines()[0] if message.strip() else "invalid pattern"


def literal_json_column(text: str) -> Column:
    """The JSON text Spark prints for the literal `text`, as documents print (folded once)."""
    return V.to_json(F.parse_json(F.lit(text)))
