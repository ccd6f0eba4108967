"""JSON text helpers for what crosses into Spark's VARIANT.

Spark's `parse_json` stores `1.0` as the decimal `1` (and prints it back as `1`), losing the
int/double distinction MQL keeps. Written with an exponent (`1.0e0`) it is stored as a DOUBLE.
Sources therefore rewrite every fractional number literal outside strings before Spark parses
the text.
"""

from __future__ import annotations

import re

_STRING_OR_DECIMAL = re.compile(r'"(?:[^"\\]|\\.)*"|(-?\d+\.\d+)(?![\deE.])')


def _rewrite(match: re.Match[str]) -> str:
    number = match.group(1)
    return match.group(0) if number is None else number + "e0"


def prefer_double(text: str) -> str:
    """Rewrite fractional number literals so that `parse_json` keeps them as doubles."""
    if "." not in text:
        return text
    return _STRING_OR_DECIMAL.sub(_rewrite, text)
