"""`$dateFromString`: parse a date string, with an optional constant `format`.

Formats support `%Y %m %d %H %M %S %L %j %z %b %B %%` (not the week-based `%G %V %u %U %w`,
which Spark cannot parse). Without a format, strings parse as ISO-8601 (see `ops_dates`).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import functions as F

from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Ctx,
    kind_text,
    named,
    placeholder,
    result,
    when_all,
)
from pipeline_stages._mql.ops.dates import (
    _constant_format,
    _no_error,
    compile_zone,
    parse_date_string,
    parse_error,
    split_format,
)
from pipeline_stages._mql.ops.messages import message
from pipeline_stages._mql.scope import Expr

_PARSE_PATTERNS = {
    "Y": "yyyy", "m": "MM", "d": "dd", "H": "HH", "M": "mm", "S": "ss", "L": "SSS",
    "j": "DDD", "z": "Z", "b": "MMM", "B": "MMMM",
}  # fmt: skip


def spark_parse_pattern(parts: list[tuple[str, str]]) -> str | None:
    """A Spark datetime pattern for MongoDB format parts, or None when one is unsupported."""
    out = []
    pending = ""
    for kind, text in parts:
        if kind == "lit" or text == "%":
            pending += "%" if kind == "spec" else text
            continue
        if text not in _PARSE_PATTERNS:
            return None
        if pending:
            out.append("'" + pending.replace("'", "''") + "'")
            pending = ""
        out.append(_PARSE_PATTERNS[text])
    if pending:
        out.append("'" + pending.replace("'", "''") + "'")
    return "".join(out)


def date_from_string(ctx: Ctx) -> Expr:
    """`$dateFromString`: `{dateString, format, timezone, onError, onNull}`."""
    spec = named(ctx, ("dateString",), ("format", "timezone", "onError", "onNull"), what="argument")
    if spec is None:
        return placeholder()
    text_arg = ctx.arg(ctx.sub(spec["dateString"], "dateString"))
    zone = compile_zone(ctx, spec)
    pattern: str | None = None
    if "format" in spec:
        fmt = _constant_format(ctx, spec)
        if fmt is None:
            return placeholder()
        parts = split_format(fmt)
        if isinstance(parts, str):
            return ctx.fail(parts, "format")
        pattern = spark_parse_pattern(parts)
        if pattern is None:
            return ctx.unsupported(
                f"$dateFromString cannot parse the format '{fmt}' in Sluice", "format"
            )
    if zone is None:
        return placeholder()
    on_error = ctx.sub(spec["onError"], "onError") if "onError" in spec else None
    on_null = ctx.sub(spec["onNull"], "onNull") if "onNull" in spec else None
    text = V.as_string(text_arg.value, text_arg.k)
    if pattern is None:
        parsed = parse_date_string(text, zone)
    else:
        raw = F.try_to_timestamp(text, F.lit(pattern))
        parsed = (
            raw
            if "%z" in spec["format"] or zone.name is None
            else F.to_utc_timestamp(raw, zone.name)
        )
    failure = when_all(
        [
            (
                ~text_arg.kind_in(("string",)),
                message(
                    "$dateFromString requires that 'dateString' be a string, found: ",
                    kind_text(text_arg),
                    " with value ",
                    F.to_json(text_arg.value),
                ),
            ),
            (parsed.isNull(), parse_error(text)),
        ]
    )
    failure = ctx.bind(failure)
    null_value = on_null.value if on_null is not None else V.null()
    value = when_all(
        [
            (text_arg.nullish, null_value),
            (zone.nullish, V.null()),
            (failure.isNotNull(), on_error.value if on_error is not None else V.null()),
        ],
        V.from_timestamp(parsed),
    )
    own = when_all(
        [
            (text_arg.nullish, on_null.error_or_null() if on_null is not None else _no_error()),
            (zone.nullish, _no_error()),
            (failure.isNotNull(), on_error.error_or_null() if on_error is not None else failure),
        ],
        _no_error(),
    )
    return result(value, text_arg.error, zone.error, own=own)


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$dateFromString": date_from_string,
}
