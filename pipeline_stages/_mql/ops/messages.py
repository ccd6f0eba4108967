"""Error-message text built in Spark: literal and column parts, numbers as MongoDB prints them.

Operator modules build their run-time error messages with these (`message("... got ", x)`);
MongoDB's wording is matched exactly, numbers included (`2`, not `2.0`; `1e+20`).
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def text(value: Column | str) -> Column:
    """A STRING column from a literal string or a column."""
    return F.lit(value) if isinstance(value, str) else value


def message(*parts: Column | str) -> Column:
    """Concatenate literal and column parts into an error message."""
    return F.concat(*[text(p) for p in parts])


def number_text(col: Column) -> Column:
    """A number for error messages (`2`, not `2.0`); cheaper than `double_text`."""
    return F.regexp_replace(col.cast("double").cast("string"), r"\.0$", "")


def double_text(x: Column) -> Column:
    """A DOUBLE as MongoDB's `{}` formatting prints it: shortest digits, `1`, `0.5`, `1e+20`."""
    positional = F.regexp_replace(
        F.regexp_replace(x.try_cast("decimal(38,20)").cast("string"), r"0+$", ""), r"\.$", ""
    )
    java = x.cast("string")  # Java's shortest form, e.g. 1.0E20, 1.5E-5
    mantissa = F.regexp_replace(F.regexp_extract(java, r"^(-?[0-9.]+)E", 1), r"\.0$", "")
    exponent = F.regexp_extract(java, r"E(-?[0-9]+)$", 1).cast("int")
    sign = F.when(exponent < 0, F.lit("-")).otherwise(F.lit("+"))
    scientific = F.concat(
        mantissa, F.lit("e"), sign, F.lpad(F.abs(exponent).cast("string"), 2, "0")
    )
    magnitude = F.abs(x)
    return (
        F.when(F.isnan(x), F.lit("NaN"))
        .when(x == float("inf"), F.lit("Infinity"))
        .when(x == float("-inf"), F.lit("-Infinity"))
        .when(x == 0, F.when(java == "-0.0", F.lit("-0")).otherwise(F.lit("0")))
        .when((magnitude >= 1e-4) & (magnitude < 1e16), positional)
        .otherwise(scientific)
    )
