"""`json_text.variant_json`: Spark's `to_json` of a VARIANT, rendered in Python.

The batch window engine ships late-document copies as VARIANT binaries and renders only the
late ones (`batch.engine.shipped_rows`); the operator ships Spark's `to_json` text. Both must
give the DLQ the same values, int, double and decimal kept apart.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pipeline_stages._stream.json_text import prefer_double, variant_json

pytestmark = pytest.mark.spark

#: JSON texts as sources deliver them (`prefer_double`) and as they are (decimals stay).
TEXTS = [
    '{"a": 0, "b": -1, "c": 9223372036854775807, "d": -9223372036854775808}',
    '{"a": 0.1, "b": -0.0, "c": 1.0, "d": 10.0, "e": 2.50, "f": 1e20, "g": 5e-324}',
    '{"a": 1.5e300, "b": -1.23456e-8, "c": 123456789012345678901234567890}',
    '{"a": 123456789012345678901234567890.5, "b": 0.00000000000000000000000000000000001}',
    '{"s": "", "t": "quote \\" back \\\\ slash / tab \\t nl \\n \\u0001", "u": "ünï ✓ 😀"}',
    '{"t": true, "f": false, "n": null, "o": {}, "l": [], "deep": [[], [[{"x": [1, 2.5]}]]]}',
    '{"$date": "2024-02-29T12:34:56.789Z", "oid": {"$oid": "65f0a1b2c3d4e5f601234567"}}',
    '[1, 2.0, -3.25, "x"]',
    "12345678901234567890123456789012345678",
    "-0.5",
]
#: VARIANTs no JSON text makes: non-finite doubles, dates, timestamps, binary, floats.
SQL = [
    "to_variant_object(named_struct('nan', double('NaN'), 'inf', double('Infinity'),"
    " 'ninf', double('-Infinity'), 'f', float(1.5)))",
    "to_variant_object(named_struct('d', date'2024-02-29', 'ts', timestamp'2024-01-01 00:00:00',"
    " 'us', timestamp'2024-01-01 00:00:00.000120', 'ms', timestamp'1970-01-01 00:00:00.005'))",
    "to_variant_object(named_struct('b', binary('héllo'), 'dec', 1.50BD, 'big', 10.00BD))",
    "to_variant_object(named_struct('ntz', timestamp_ntz'2024-01-01 01:02:03.4'))",
]


def typed(value: Any) -> Any:
    """A parsed JSON value with its kind: 1, 1.0 and the decimal 1 stay apart."""
    if isinstance(value, dict):
        return {k: typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    return (type(value).__name__, value)


def parsed(text: str) -> Any:
    """What the DLQ makes of a late document's text (`runtime.emit.late_doc`, `json.loads`)."""
    return typed(json.loads(prefer_double(text), parse_constant=str))


def test_variant_json_reads_back_as_sparks_to_json(spark: Any) -> None:
    texts = [prefer_double(t) for t in TEXTS] + TEXTS
    selects = [f"parse_json('{t.replace(chr(92), chr(92) * 2)}')" for t in texts] + SQL
    rows = (
        spark.sql(" UNION ALL ".join(f"SELECT {i} AS i, {v} AS v" for i, v in enumerate(selects)))
        .selectExpr("i", "v", "to_json(v) AS j")
        .orderBy("i")
        .collect()
    )
    assert len(rows) == len(selects)
    for row in rows:
        ours = variant_json(row["v"])
        assert parsed(ours) == parsed(row["j"]), f"{selects[row['i']]}: {ours} != {row['j']}"


def test_variant_json_keeps_every_digit_of_a_38_digit_decimal(spark: Any) -> None:
    (row,) = spark.sql(
        "SELECT parse_json('-12345678901234567890123456789012345678') AS v"
    ).collect()
    assert variant_json(row["v"]) == "-12345678901234567890123456789012345678"
    # PySpark's own rendering rounds it to 28 digits.
    assert row["v"].toJson() != "-12345678901234567890123456789012345678"
