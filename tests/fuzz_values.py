"""Extreme and malformed values for the fuzz suites (`tests/unit/documents/test_codec_fuzz.py`
on the codecs, `tests/integration/test_poison_fuzz.py` through Spark and the real service)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Strings with what JSON allows and UTF-8 does not (lone surrogates), and control characters.
TEXT = st.text(alphabet=st.characters(codec=None, categories=None), max_size=12) | st.sampled_from(
    ["", "\ud800", "\udfff", "a\x00b", "\U0001f600", "garbage", "2024-01-01T00:00:00Z"]
)
NUMBERS = (
    st.integers(min_value=-(2**80), max_value=2**80)
    | st.sampled_from([2**63, -(2**63) - 1, 2**64, 10**40, 0, -0])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([1e308, -1e308, 5e-324, 1e30, -0.0, 1.5])
)
#: `$date` in every form, out of range and malformed among them.
DATES = st.one_of(
    TEXT,
    NUMBERS,
    st.sampled_from(["+10000-01-01T00:00:00Z", "0000-12-31T23:59:59Z", "2024-13-45T00:00:00Z"]),
    st.builds(lambda t: {"$numberLong": t}, TEXT | st.integers().map(str) | NUMBERS),
    st.sampled_from([None, True, [], {}]),
)
WRAPPERS = st.one_of(
    st.builds(lambda v: {"$date": v}, DATES),
    st.builds(lambda v: {"$numberDecimal": v}, TEXT | NUMBERS | st.sampled_from(["1e9999", "NaN"])),
    st.builds(lambda v: {"$numberLong": v}, TEXT | NUMBERS),
    st.builds(lambda v: {"$numberInt": v}, TEXT | NUMBERS),
    st.builds(lambda v: {"$numberDouble": v}, TEXT | NUMBERS),
    st.builds(lambda v: {"$oid": v}, TEXT | NUMBERS),
    st.builds(lambda b, t: {"$binary": {"base64": b, "subType": t}}, TEXT, TEXT),
    st.builds(lambda v: {"$date": v, "x": 1}, DATES),
)
LEAVES = st.none() | st.booleans() | NUMBERS | TEXT | WRAPPERS
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=16,
)
DOCUMENTS = st.dictionaries(TEXT, VALUES, max_size=5)


def deep_text(depth: int) -> str:
    """A document nesting `depth` levels (objects and arrays in turn), as JSON text (the
    stdlib's encoder recurses)."""
    half = (depth - 1) // 2
    leaf = "{}" if depth % 2 == 0 else "0"
    return '{"d":' + '{"k":[' * half + leaf + "]}" * half + "}"


def nested(depth: int, *, leaf: Any = 0) -> Any:
    """A document nesting `depth` levels (objects and arrays in turn), built without
    recursion."""
    value = leaf
    for level in range(depth - 1):
        value = [value] if level % 2 else {"k": value}
    return {"d": value}


def dumps(value: Any) -> str:
    """JSON text as any producer might write it (NaN and lone surrogates included)."""
    return json.dumps(value, allow_nan=True, ensure_ascii=False)
