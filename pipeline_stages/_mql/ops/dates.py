"""Date operators: date parts, `$dateToString`, `$dateFromString`, time zones.

Dates are instants (`values.as_timestamp`, a Spark TIMESTAMP in the UTC session time zone).
A `timezone` (Olson name such as `Europe/Paris`, or an offset `+05:30`, `-0800`, `+03`)
shifts the instant to local wall-clock time with `from_utc_timestamp` before parts are read.
Constant zones are checked at compile time; per-document zones that Java does not know are a
per-document error (`unrecognized time zone identifier`), never a query failure.

`$dateToString` and `$dateFromString` need a constant `format` (computed formats are
reported as `unsupported_option`). Formatting supports every MongoDB specifier; parsing
supports `%Y %m %d %H %M %S %L %j %z %b %B %%` (not the week-based `%G %V %u %U %w`, which
Spark cannot parse). Without a format, date strings are parsed as ISO-8601 in its common
forms (`2024-01-31`, `2024-01-31T10:00:00.123`, with `Z`, `+hh:mm`, `+hhmm` or `+hh`);
MongoDB's parser accepts more free-form strings. Parse failures read
`Error parsing date string '<s>'` (MongoDB appends the parser's own diagnostics).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    kind_text,
    named,
    placeholder,
    result,
    when_all,
)
from pipeline_stages._mql.ops.messages import message
from pipeline_stages._mql.scope import Expr

_ZONE_SUFFIX = r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"


def _no_error() -> Column:
    return F.lit(None).cast("string")


@dataclass(frozen=True)
class Zone:
    """A compiled `timezone` argument: its name (None = UTC), error, and null-ness."""

    name: Column | None
    error: Column | None
    nullish: Column


def zone_known(name: str) -> bool:
    """Whether Java (and so Spark) knows the zone id; True when no session is active."""
    session = SparkSession.getActiveSession()
    if session is None:
        return True
    try:
        session._jvm.java.time.ZoneId.of(name)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - py4j wraps the Java exception
        return False
    return True


def compile_zone(ctx: Ctx, spec: dict[str, Any], key: str = "timezone") -> Zone | None:
    """Compile the optional time zone argument; None when a constant zone is invalid."""
    if key not in spec:
        return Zone(None, None, F.lit(False))
    expr = ctx.sub(spec[key], key)
    if expr.is_const:
        if expr.const is None:
            return Zone(None, None, F.lit(True))
        if not isinstance(expr.const, str):
            ctx.fail(f"timezone must evaluate to a string, found {V.literal_kind(expr.const)}", key)
            return None
        if not zone_known(expr.const):
            ctx.fail(f'unrecognized time zone identifier: "{expr.const}"', key)
            return None
        return Zone(F.lit(expr.const), None, F.lit(False))
    a = ctx.arg(expr)
    name = V.as_string(a.value, a.k)
    valid = F.call_function("try_reflect", F.lit("java.time.ZoneId"), F.lit("of"), name).isNotNull()
    error = when_all(
        [
            (a.nullish, _no_error()),
            (
                ~a.kind_in(("string",)),
                message("timezone must evaluate to a string, found ", kind_text(a)),
            ),
            (~valid, message('unrecognized time zone identifier: "', name, '"')),
        ]
    )
    error = F.coalesce(a.error, error) if a.error is not None else error
    return Zone(F.when(valid, name), error, a.nullish)


def to_local(ts: Column, zone: Zone) -> Column:
    """The wall-clock time in `zone` of instant `ts`."""
    return ts if zone.name is None else F.from_utc_timestamp(ts, zone.name)


def from_local(local: Column, zone: Zone) -> Column:
    """The instant of wall-clock time `local` in `zone`."""
    return local if zone.name is None else F.to_utc_timestamp(local, zone.name)


def date_error(a: Arg) -> Column:
    """MongoDB's `coerceToDate` error for a non-date, non-nullish operand."""
    return F.when(
        ~a.nullish & ~a.kind_in(("date",)),
        message("can't convert from BSON type ", kind_text(a), " to Date"),
    )


def parse_date_string(text: Column, zone: Zone | None = None) -> Column:
    """Parse an ISO-8601 date string to an instant (NULL when it is not one)."""
    parsed = F.try_to_timestamp(text)
    if zone is None or zone.name is None:
        return parsed
    has_zone = F.regexp_like(F.trim(text), F.lit(_ZONE_SUFFIX))
    return F.when(has_zone, parsed).otherwise(F.to_utc_timestamp(parsed, zone.name))


def parse_error(text: Column) -> Column:
    """The message for a date string that could not be parsed."""
    return message("Error parsing date string '", text, "'")


# --------------------------------------------------------------------------- parts


def iso_day_of_week(local: Column) -> Column:
    """1 (Monday) .. 7 (Sunday)."""
    return (F.dayofweek(local) + 5) % 7 + 1


def iso_week_year(local: Column) -> Column:
    """The year of the ISO week (the year of that week's Thursday)."""
    return F.year(F.date_add(F.to_date(local), 4 - iso_day_of_week(local)))


def week_of_year(local: Column) -> Column:
    """`%U`: weeks starting on Sunday, 0 before the year's first Sunday."""
    return F.floor((F.dayofyear(local) + 6 - (F.dayofweek(local) - 1)) / 7)


def millisecond(local: Column) -> Column:
    """Milliseconds within the second."""
    return F.pmod(F.unix_millis(local), F.lit(1000))


PARTS: dict[str, Callable[[Column], Column]] = {
    "$year": F.year,
    "$month": F.month,
    "$dayOfMonth": F.dayofmonth,
    "$hour": F.hour,
    "$minute": F.minute,
    "$second": F.second,
    "$millisecond": millisecond,
    "$dayOfYear": F.dayofyear,
    "$dayOfWeek": F.dayofweek,
    "$week": week_of_year,
    "$isoWeek": F.weekofyear,
    "$isoWeekYear": iso_week_year,
    "$isoDayOfWeek": iso_day_of_week,
}


def _part_specs(ctx: Ctx) -> dict[str, Any] | None:
    spec = ctx.spec
    if isinstance(spec, list):
        if len(spec) != 1:
            ctx.fail(f"Expression {ctx.op} takes exactly 1 arguments. {len(spec)} were passed in.")
            return None
        return {"date": spec[0], "_list": True}
    if isinstance(spec, dict) and spec and not next(iter(spec)).startswith("$"):
        for key in spec:
            if key not in ("date", "timezone"):
                ctx.fail(f'unrecognized option to {ctx.op}: "{key}"', key)
                return None
        if "date" not in spec:
            ctx.fail(f"missing 'date' argument to {ctx.op}")
            return None
        return dict(spec)
    return {"date": spec, "_bare": True}


def date_part(ctx: Ctx) -> Expr:
    """`$year`, `$month`, ... with an optional `timezone`."""
    specs = _part_specs(ctx)
    if specs is None:
        return placeholder()
    if "_bare" in specs:
        date = ctx.arg(ctx.sub(specs["date"]))
    else:
        date = ctx.arg(ctx.sub(specs["date"], 0 if "_list" in specs else "date"))
    zone = compile_zone(ctx, specs)
    if zone is None:
        return placeholder()
    local = to_local(V.as_timestamp(date.value, date.k), zone)
    value = F.when(date.nullish | zone.nullish, V.null()).otherwise(
        V.from_long(PARTS[ctx.op](local))
    )
    return result(value, date.error, zone.error, own=date_error(date), kinds={"int", "null"})


# --------------------------------------------------------------------------- $dateToString


def _pad(col: Column, width: int) -> Column:
    return F.lpad(col.cast("string"), width, "0")


def _offset_parts(ts: Column, local: Column) -> tuple[Column, Column]:
    minutes = F.floor((F.unix_millis(local) - F.unix_millis(ts)) / 60000)
    sign = F.when(minutes < 0, F.lit("-")).otherwise(F.lit("+"))
    return minutes, sign


def _format_piece(spec: str, ts: Column, local: Column) -> Column:
    minutes, sign = _offset_parts(ts, local)
    pieces: dict[str, Callable[[], Column]] = {
        "d": lambda: _pad(F.dayofmonth(local), 2),
        "G": lambda: _pad(iso_week_year(local), 4),
        "H": lambda: _pad(F.hour(local), 2),
        "j": lambda: _pad(F.dayofyear(local), 3),
        "L": lambda: _pad(millisecond(local), 3),
        "m": lambda: _pad(F.month(local), 2),
        "M": lambda: _pad(F.minute(local), 2),
        "S": lambda: _pad(F.second(local), 2),
        "w": lambda: F.dayofweek(local).cast("string"),
        "u": lambda: iso_day_of_week(local).cast("string"),
        "U": lambda: _pad(week_of_year(local), 2),
        "V": lambda: _pad(F.weekofyear(local), 2),
        "Y": lambda: _pad(F.year(local), 4),
        "z": lambda: F.concat(
            sign, _pad(F.floor(F.abs(minutes) / 60), 2), _pad(F.abs(minutes) % 60, 2)
        ),
        "Z": lambda: F.concat(sign, F.abs(minutes).cast("string")),
        "b": lambda: F.date_format(local, "MMM"),
        "B": lambda: F.date_format(local, "MMMM"),
        "%": lambda: F.lit("%"),
    }
    return pieces[spec]()


FORMAT_SPECIFIERS = frozenset("dGHjLmMSwuUVYzZbB%")


def split_format(fmt: str) -> list[tuple[str, str]] | str:
    """Split a MongoDB format into ("lit", text) / ("spec", letter) parts, or an error text."""
    parts: list[tuple[str, str]] = []
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%":
            parts.append(("lit", ch))
            i += 1
            continue
        if i + 1 >= len(fmt):
            return "Unmatched '%' at end of format string"
        spec = fmt[i + 1]
        if spec not in FORMAT_SPECIFIERS:
            return f"Invalid format character '%{spec}' in format string"
        parts.append(("spec", spec))
        i += 2
    return parts


def format_date(ts: Column, local: Column, parts: list[tuple[str, str]]) -> Column:
    """Render the instant `ts` (wall clock `local`) with parsed format `parts`."""
    cols: list[Column] = []
    literal = ""
    for kind, text in parts:
        if kind == "lit":
            literal += text
            continue
        if literal:
            cols.append(F.lit(literal))
            literal = ""
        cols.append(_format_piece(text, ts, local))
    if literal:
        cols.append(F.lit(literal))
    return F.concat(*cols) if cols else F.lit("")


ISO_FORMAT_Z = "%Y-%m-%dT%H:%M:%S.%LZ"
ISO_FORMAT_LOCAL = "%Y-%m-%dT%H:%M:%S.%L"


def _constant_format(ctx: Ctx, spec: dict[str, Any]) -> str | None:
    fmt = ctx.sub(spec["format"], "format")
    if not fmt.is_const:
        ctx.unsupported(f"{ctx.op} requires a constant 'format' in Sluice", "format")
        return None
    if not isinstance(fmt.const, str):
        kind = V.literal_kind(fmt.const)
        ctx.fail(
            f"{ctx.op} requires that 'format' be a string, found: {kind} with value {fmt.const}",
            "format",
        )
        return None
    return fmt.const


def date_to_string(ctx: Ctx) -> Expr:
    """`$dateToString`: `{date, format, timezone, onNull}`."""
    spec = named(ctx, ("date",), ("format", "timezone", "onNull"), what="argument")
    if spec is None:
        return placeholder()
    date = ctx.arg(ctx.sub(spec["date"], "date"))
    zone = compile_zone(ctx, spec)
    fmt = (
        _constant_format(ctx, spec)
        if "format" in spec
        else (ISO_FORMAT_Z if "timezone" not in spec else ISO_FORMAT_LOCAL)
    )
    if zone is None or fmt is None:
        return placeholder()
    parts = split_format(fmt)
    if isinstance(parts, str):
        return ctx.fail(parts, "format")
    on_null = ctx.sub(spec["onNull"], "onNull") if "onNull" in spec else None
    ts = ctx.bind(V.as_timestamp(date.value, date.k))
    local = ctx.bind(to_local(ts, zone)) if zone.name is not None else ts
    text = format_date(ts, local, parts)
    null_value = on_null.value if on_null is not None else V.null()
    value = when_all([(date.nullish, null_value), (zone.nullish, V.null())], V.from_string(text))
    own = F.when(
        date.nullish, on_null.error_or_null() if on_null is not None else _no_error()
    ).otherwise(date_error(date))
    return result(value, date.error, zone.error, own=own)


# --------------------------------------------------------------------------- $dateFromString

OPS: dict[str, Callable[[Ctx], Expr]] = {
    **dict.fromkeys(PARTS, date_part),
    "$dateToString": date_to_string,
}
