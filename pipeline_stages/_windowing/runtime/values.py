"""MQL values between the operator's pandas input/output and Python (no Spark here).

Values arrive as the typed columns of `runtime.config.ValueColumns` (a code, an integer, a
double and a text) so that numbers never go through JSON; documents leave as JSON text
written so that Spark's `parse_json` keeps doubles doubles (`json_text.prefer_double`).

Spark hands over documents of up to `SPARK_MAX_DEPTH` (1000) levels, and decoding or encoding
one recurses about twice per level: more than Python's default limit of 1000 frames, which
made one deep document in a `$push` fail the whole query. Importing this module raises the
limit of the process (a Python worker, or the driver for the batch engine) to
`RECURSION_LIMIT`; a frame of these functions costs no C stack in Python 3.11, and the C
parser's levels a few hundred bytes each.
"""

from __future__ import annotations

import json
import math
import sys
from datetime import datetime
from json.encoder import encode_basestring as _string
from typing import Any

import numpy as np
import pandas as pd
from bson import Int64

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import MISSING, format_iso_date, to_datetime_ms, to_ejson
from pipeline_stages._stream.json_text import SPARK_MAX_DEPTH, prefer_double
from pipeline_stages._windowing.geometry import GLOBAL_SPAN_MS
from pipeline_stages._windowing.runtime import config as C

#: Enough frames to decode and re-encode the deepest document Spark reads, with room for the
#: callers' own frames (see the module docstring).
RECURSION_LIMIT = 4 * SPARK_MAX_DEPTH + 1000
if sys.getrecursionlimit() < RECURSION_LIMIT:
    sys.setrecursionlimit(RECURSION_LIMIT)


def decode_column(pdf: pd.DataFrame, columns: C.ValueColumns, rows: np.ndarray) -> list[Any]:
    """The MQL values of `rows` (positional indexes into `pdf`), MISSING for missing."""
    k, i, d, j = columns.names
    codes = pdf[k].to_numpy()[rows]
    ints = pdf[i].to_numpy()[rows].tolist()
    doubles = pdf[d].to_numpy()[rows].tolist()
    texts = pdf[j].to_numpy()[rows]
    out: list[Any] = []
    for n, code in enumerate(codes.tolist()):
        out.append(_decode(code, ints[n], doubles[n], texts[n]))
    return out


def _decode(code: int, integral: int, double: float, text: Any) -> Any:
    if code == C.CODE_INT:
        return integral
    if code == C.CODE_DOUBLE:
        return double
    if code == C.CODE_MISSING:
        return MISSING
    return decode_json(text)


def decode_json(text: str | None) -> Any:
    """A JSON text (relaxed Extended JSON) as MQL values; None text is missing."""
    if text is None:
        return MISSING
    return from_ejson(json.loads(text))


def encode(value: Any) -> str:
    """JSON text of an MQL value (document) that `parse_json` reads back with its types.

    Doubles are written with an exponent (`2.5e0`): `parse_json` keeps those as doubles where
    it would read `2.5` as a decimal and `3.0` as the integer 3 (see `json_text`). Written by
    hand because window results are encoded by the thousand per micro-batch.
    """
    out: list[str] = []
    _encode(value, out.append)
    return "".join(out)


def _encode(value: Any, write: Any) -> None:
    kind = type(value)
    if kind is str:
        write(_string(value))
    elif kind is float:
        if math.isfinite(value):
            text = repr(value)
            write(text if "e" in text else text + "e0")
        else:
            write(json.dumps(to_ejson(value)))
    elif kind is bool:
        write("true" if value else "false")
    elif value is None:
        write("null")
    elif kind is int or kind is Int64:
        write(str(int(value)))
    elif kind is dict:
        write("{")
        first = True
        for name, item in value.items():
            if item is MISSING:
                continue
            write(_string(name) + ":" if first else "," + _string(name) + ":")
            first = False
            _encode(item, write)
        write("}")
    elif kind is list or kind is tuple:
        write("[" + ",".join(map(_item, value)) + "]")
    elif kind is datetime:
        write('{"$date":"' + format_iso_date(value) + '"}')
    else:
        write(prefer_double(json.dumps(to_ejson(value), separators=(",", ":"))))


def _item(value: Any) -> str:
    """One array element's text (numbers inline: arrays of numbers are common results)."""
    kind = type(value)
    if kind is float and math.isfinite(value):
        text = repr(value)
        return text if "e" in text else text + "e0"
    if kind is int:
        return str(value)
    return encode(None if value is MISSING else value)


def date_json(epoch_ms: int) -> dict[str, str]:
    """The relaxed Extended JSON of a date."""
    return {"$date": format_iso_date(to_datetime_ms(epoch_ms))}


def window_meta(start: int, end: int, partition: Any = MISSING) -> dict[str, Any]:
    """`_stream_meta.window` / `{$meta: "stream.window"}` of a window, as MQL values (§5);
    `$globalWindow`'s window has no start or end (its span is `GLOBAL_SPAN_MS`)."""
    meta: dict[str, Any] = (
        {}
        if end - start >= GLOBAL_SPAN_MS
        else {"start": to_datetime_ms(start), "end": to_datetime_ms(end)}
    )
    if partition is not MISSING:
        meta["partition"] = partition
    return meta


def with_window(doc: Any, meta_field: str, window: dict[str, Any]) -> Any:
    """A document with `window` merged into its stream-metadata object (pass-through, $$ROOT)."""
    if not meta_field or not isinstance(doc, dict):
        return doc
    current = doc.get(meta_field)
    merged = dict(current) if isinstance(current, dict) else {}
    merged["window"] = dict(window)
    return {**doc, meta_field: merged}


def is_date(value: Any) -> bool:
    """True for MQL dates."""
    return isinstance(value, datetime)
