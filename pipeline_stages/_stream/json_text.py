"""JSON text helpers for what crosses into Spark's VARIANT.

Spark's `parse_json` stores `1.0` as the decimal `1` (and prints it back as `1`), losing the
int/double distinction MQL keeps. Written with an exponent (`1.0e0`) it is stored as a DOUBLE.
Sources therefore rewrite every fractional number literal outside strings before Spark parses
the text.

`variant_json` renders a VARIANT the way Spark's `to_json` does, in Python, for the batch
engine's late-document copies (`batch.engine.shipped_rows`).

`json_depth` measures how deeply a JSON text nests without parsing it (no recursion, so any
depth), against the two limits that matter: Spark's JSON parser reads at most
`SPARK_MAX_DEPTH` levels, and a BSON document (a MongoDB collection, a DLQ record) holds at
most `BSON_MAX_DEPTH`.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from pyspark.sql.types import VariantVal

_STRING_OR_DECIMAL = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+\.\d+)(?![\deE.])')


def _rewrite(match: re.Match[str]) -> str:
    number = match.group(1)
    return match.group(0) if number is None else number + "e0"


#: The deepest nesting Spark's JSON parser reads (Jackson's default `maxNestingDepth`); a
#: deeper record is not parsed, so it goes to the DLQ.
SPARK_MAX_DEPTH: Final = 1000
#: The deepest nesting of a BSON document MongoDB stores ("no more than 100 levels"): Sluice's
#: collection sinks and DLQ records keep to it, on `local` as on a cluster.
BSON_MAX_DEPTH: Final = 100
#: A `\\uD800`-`\\uDFFF` escape: JSON text may hold half a surrogate pair, UTF-8 cannot
#: (a record's text decoded from UTF-8 holds a surrogate only through such an escape).
SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")

#: A JSON string literal, unrolled (no alternation per character: fast on long strings).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
#: Opening brackets to 1, closing ones to -1 (as signed bytes); everything else is deleted.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def json_depth(text: str) -> int:
    """How many levels of objects and arrays `text` nests (`{}` is 1, a scalar 0).

    The text is not parsed: brackets outside strings are counted, so any depth is measured
    without recursion (malformed text gets a number too; it is not validated here).
    """
    if "{" not in text and "[" not in text:
        return 0
    outside = _STRING.sub("", text).encode("utf-8", "surrogatepass")
    steps = memoryview(outside.translate(_STEPS, _NOT_BRACKETS)).cast("b")
    return max(accumulate(steps), default=0)


def nests_deeper_than(text: str, limit: int) -> bool:
    """Whether `text` nests more than `limit` levels (see `json_depth`); cheap for most texts:
    a text with at most `limit` opening brackets cannot."""
    if text.count("{") + text.count("[") <= limit:
        return False
    return json_depth(text) > limit


def prefer_double(text: str) -> str:
    """Rewrite fractional number literals so that `parse_json` keeps them as doubles."""
    if "." not in text:
        return text
    return _STRING_OR_DECIMAL.sub(_rewrite, text)


#: A VARIANT decimal has at most 38 digits; PySpark builds it under the current context.
_DECIMAL_CONTEXT = decimal.Context(prec=40)


def variant_json(variant: VariantVal) -> str:
    """Spark's `to_json` of `variant` (session time zone UTC), as text that parses to the
    same values.

    Not `VariantVal.toJson`: that rounds decimals past 28 digits, prints a decimal's
    trailing zeros (Spark drops them: `1.0` is `1`), and writes NaN and infinities as
    Python's `nan`/`inf`, which no JSON parser reads."""
    return value_json(variant_value(variant))


def variant_value(variant: VariantVal) -> Any:
    """The VARIANT as Python values (`VariantVal.toPython`), decimals kept whole."""
    with decimal.localcontext(_DECIMAL_CONTEXT):
        return variant.toPython()


def value_json(value: Any) -> str:
    """`variant_json` of the values `variant_value` gives (changed or not)."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k) + ":" + value_json(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(value_json(v) for v in value) + "]"
    if value is None or isinstance(value, bool | int | str):
        return json.dumps(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, decimal.Decimal):
        return format(value.normalize(_DECIMAL_CONTEXT), "f")
    if isinstance(value, bytes):
        return json.dumps(base64.b64encode(value).decode("ascii"))
    if isinstance(value, dt.datetime):
        return json.dumps(_timestamp_text(value))
    if isinstance(value, dt.date):
        return json.dumps(value.isoformat())
    raise TypeError(f"no JSON form for a VARIANT value of type {type(value).__name__}")


def _timestamp_text(moment: dt.datetime) -> str:
    """Spark's text of a timestamp: fraction without trailing zeros, `+00:00` in UTC."""
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    if moment.tzinfo is not None:
        offset = moment.strftime("%z")
        text += f"{offset[:3]}:{offset[3:]}"
    return text
