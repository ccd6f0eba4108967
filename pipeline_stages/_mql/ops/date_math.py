"""Date arithmetic: `$dateAdd`, `$dateSubtract`, `$dateDiff`, `$dateTrunc`.

Units of a day or more work on wall-clock time in `timezone` (adding a day across a DST change
keeps the local time of day; months clamp to the month's last day); smaller units are exact
milliseconds. `$dateDiff` counts unit boundaries crossed, as MongoDB does (`2021-12-31` to
`2022-01-01` is one year). `$dateTrunc` bins from MongoDB's reference point 2000-01-01 (for
weeks, the first `startOfWeek` day on or after it).

`unit` and `startOfWeek` must be constants in Sluice (`unsupported_option` otherwise); the
other arguments may be computed per document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
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
from pipeline_stages._mql.ops.dates import Zone, compile_zone, from_local, to_local
from pipeline_stages._mql.ops.messages import message
from pipeline_stages._mql.scope import Expr

UNIT_MS = {"millisecond": 1, "second": 1000, "minute": 60_000, "hour": 3_600_000}
DAY_UNITS = {"day": 1, "week": 7}
MONTH_UNITS = {"month": 1, "quarter": 3, "year": 12}
UNITS = (*UNIT_MS, *DAY_UNITS, *MONTH_UNITS)
DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_DAY_ABBREVIATIONS = {d[:3]: d for d in DAYS}
#: 2000-01-01T00:00:00 as epoch milliseconds and epoch days.
REFERENCE_MS = 946_684_800_000
REFERENCE_DAY = 10_957


def _no_error() -> Column:
    return F.lit(None).cast("string")


def _const_unit(ctx: Ctx, spec: dict[str, Any]) -> str | None:
    unit = ctx.sub(spec["unit"], "unit")
    if not unit.is_const:
        ctx.unsupported(f"{ctx.op} requires a constant 'unit' in Sluice", "unit")
        return None
    if not isinstance(unit.const, str):
        ctx.fail(
            f"{ctx.op} requires 'unit' to be a string, but got {V.literal_kind(unit.const)}", "unit"
        )
        return None
    if unit.const not in UNITS:
        ctx.fail(
            f"{ctx.op} parameter 'unit' value parsing failed :: caused by :: unknown time unit value: {unit.const}",
            "unit",
        )
        return None
    return unit.const


def _const_start_of_week(ctx: Ctx, spec: dict[str, Any]) -> int | None:
    """Index into `DAYS` (0 = Sunday, the default)."""
    if "startOfWeek" not in spec:
        return 0
    day = ctx.sub(spec["startOfWeek"], "startOfWeek")
    if not day.is_const:
        ctx.unsupported(f"{ctx.op} requires a constant 'startOfWeek' in Sluice", "startOfWeek")
        return None
    name = day.const.lower() if isinstance(day.const, str) else None
    name = _DAY_ABBREVIATIONS.get(name, name) if name else None
    if name not in DAYS:
        ctx.fail(
            f"{ctx.op} parameter 'startOfWeek' value cannot be recognized as a day of a week: {day.const}",
            "startOfWeek",
        )
        return None
    return DAYS.index(name)


def _date_operand(ctx: Ctx, spec: dict[str, Any], key: str) -> Arg:
    return ctx.arg(ctx.sub(spec[key], key))


def _add_units(ts: Column, unit: str, amount: Column, zone: Zone) -> Column:
    """`ts` plus `amount` units (NULL when the result overflows)."""
    if unit in UNIT_MS:
        millis = F.try_add(F.unix_millis(ts), F.try_multiply(amount, F.lit(UNIT_MS[unit])))
        return V.timestamp_from_ms(millis)
    local = to_local(ts, zone)
    if unit in DAY_UNITS:
        days = F.try_multiply(amount, F.lit(DAY_UNITS[unit]))
        fits = days.between(-(2**31), 2**31 - 1)
        shifted = F.try_add(local, F.make_dt_interval(F.when(fits, days).cast("int")))
    else:
        months = F.try_multiply(amount, F.lit(MONTH_UNITS[unit]))
        fits = months.between(-(2**31), 2**31 - 1)
        shifted = F.try_add(local, F.make_ym_interval(F.lit(0), F.when(fits, months).cast("int")))
    moved = from_local(shifted, zone)
    return F.when(F.unix_millis(moved).between(V.MIN_DATE_MS, V.MAX_DATE_MS), moved)


def _date_arith(ctx: Ctx) -> Expr:
    spec = named(ctx, ("startDate", "unit", "amount"), ("timezone",), what="argument")
    if spec is None:
        return placeholder()
    start = _date_operand(ctx, spec, "startDate")
    amount = ctx.arg(ctx.sub(spec["amount"], "amount"))
    unit, zone = _const_unit(ctx, spec), compile_zone(ctx, spec)
    if unit is None or zone is None:
        return placeholder()
    n = V.as_whole_number(amount.value, amount.k)
    if ctx.op == "$dateSubtract":
        n = F.when(n != F.lit(-(2**63)), -n)
    moved = ctx.bind(_add_units(V.as_timestamp(start.value, start.k), unit, n, zone))
    nullish = start.nullish | amount.nullish | zone.nullish
    own = when_all(
        [
            (nullish, _no_error()),
            (
                ~start.kind_in(("date",)),
                F.lit(f"{ctx.op} requires startDate to be convertible to a date"),
            ),
            (n.isNull(), F.lit(f"{ctx.op} expects integer amount of time units")),
            (moved.isNull(), F.lit(f"{ctx.op} overflowed")),
        ]
    )
    value = F.when(nullish, V.null()).otherwise(V.from_timestamp(moved))
    return result(value, start.error, amount.error, zone.error, own=own, kinds={"date", "null"})


def _week_index(days: Column, start_of_week: int) -> Column:
    """Weeks since a week-start day, for epoch-day numbers (1970-01-01 was a Thursday)."""
    thursday = 4
    return F.floor((days - (start_of_week - thursday) % 7) / 7)


def _epoch_days(local: Column) -> Column:
    return F.unix_date(F.to_date(local))


def _month_index(local: Column) -> Column:
    return F.year(local) * 12 + F.month(local) - 1


def _diff(unit: str, ls: Column, le: Column, start_of_week: int) -> Column:
    """Unit boundaries crossed between wall-clock times `ls` and `le`."""
    if unit in UNIT_MS:
        size = UNIT_MS[unit]
        return F.floor(F.unix_millis(le) / size) - F.floor(F.unix_millis(ls) / size)
    if unit == "day":
        return _epoch_days(le) - _epoch_days(ls)
    if unit == "week":
        return _week_index(_epoch_days(le), start_of_week) - _week_index(
            _epoch_days(ls), start_of_week
        )
    size = MONTH_UNITS[unit]
    return F.floor(_month_index(le) / size) - F.floor(_month_index(ls) / size)


def date_diff(ctx: Ctx) -> Expr:
    """`$dateDiff`: `{startDate, endDate, unit, timezone, startOfWeek}` (a long)."""
    spec = named(
        ctx, ("startDate", "endDate", "unit"), ("timezone", "startOfWeek"), what="argument"
    )
    if spec is None:
        return placeholder()
    start, end = _date_operand(ctx, spec, "startDate"), _date_operand(ctx, spec, "endDate")
    unit, zone = _const_unit(ctx, spec), compile_zone(ctx, spec)
    week_start = _const_start_of_week(ctx, spec)
    if unit is None or zone is None or week_start is None:
        return placeholder()
    nullish = start.nullish | end.nullish | zone.nullish
    own = when_all(
        [
            (nullish, _no_error()),
            (
                ~start.kind_in(("date",)),
                message("$dateDiff requires 'startDate' to be a date, but got ", kind_text(start)),
            ),
            (
                ~end.kind_in(("date",)),
                message("$dateDiff requires 'endDate' to be a date, but got ", kind_text(end)),
            ),
        ]
    )
    ls = ctx.bind(to_local(V.as_timestamp(start.value, start.k), zone))
    le = ctx.bind(to_local(V.as_timestamp(end.value, end.k), zone))
    diff = _diff(unit, ls, le, week_start)
    value = F.when(nullish, V.null()).otherwise(V.from_long(diff))
    return result(value, start.error, end.error, zone.error, own=own, kinds={"int", "long", "null"})


def _trunc_local(unit: str, local: Column, bins: Column, start_of_week: int) -> Column:
    """The start (wall clock) of the `bins`-unit bin holding `local`."""
    if unit in UNIT_MS:
        size = bins * UNIT_MS[unit]
        shifted = F.unix_millis(local) - REFERENCE_MS
        return F.timestamp_millis(F.unix_millis(local) - F.pmod(shifted, size))
    if unit in DAY_UNITS:
        ref = REFERENCE_DAY + (start_of_week - 6) % 7 if unit == "week" else REFERENCE_DAY
        step = DAY_UNITS[unit]
        distance = F.floor((_epoch_days(local) - ref) / step)
        lower = distance - F.pmod(distance, bins)
        return F.date_from_unix_date((lower * step + ref).cast("int")).cast("timestamp")
    months = MONTH_UNITS[unit]
    distance = F.floor((_month_index(local) - 2000 * 12) / months)
    lower = (distance - F.pmod(distance, bins)) * months + 2000 * 12
    return F.make_timestamp(
        F.floor(lower / 12).cast("int"),
        (F.pmod(lower, 12) + 1).cast("int"),
        F.lit(1),
        F.lit(0),
        F.lit(0),
        F.lit(0),
    )


def date_trunc(ctx: Ctx) -> Expr:
    """`$dateTrunc`: `{date, unit, binSize, timezone, startOfWeek}`."""
    spec = named(ctx, ("date", "unit"), ("binSize", "timezone", "startOfWeek"), what="argument")
    if spec is None:
        return placeholder()
    date = _date_operand(ctx, spec, "date")
    unit, zone = _const_unit(ctx, spec), compile_zone(ctx, spec)
    week_start = _const_start_of_week(ctx, spec)
    if unit is None or zone is None or week_start is None:
        return placeholder()
    bins_arg = ctx.arg(ctx.sub(spec["binSize"], "binSize")) if "binSize" in spec else None
    bins = V.as_whole_number(bins_arg.value, bins_arg.k) if bins_arg else F.lit(1).cast("bigint")
    nullish = date.nullish | zone.nullish | (bins_arg.nullish if bins_arg else F.lit(False))
    checks = [(nullish, _no_error())]
    if bins_arg is not None:
        checks.append(
            (
                bins.isNull(),
                message(
                    "$dateTrunc requires 'binSize' to be a 64-bit integer, but got value '",
                    F.to_json(bins_arg.value),
                    "' of type ",
                    kind_text(bins_arg),
                ),
            )
        )
        checks.append(
            (
                bins <= 0,
                message(
                    "$dateTrunc requires 'binSize' to be greater than 0, but got value ",
                    bins.cast("string"),
                ),
            )
        )
    checks.append(
        (
            ~date.kind_in(("date",)),
            message("$dateTrunc requires 'date' to be a date, but got ", kind_text(date)),
        )
    )
    safe_bins = F.when(bins > 0, bins).otherwise(F.lit(1))
    local = ctx.bind(to_local(V.as_timestamp(date.value, date.k), zone))
    truncated = from_local(_trunc_local(unit, local, safe_bins, week_start), zone)
    value = F.when(nullish, V.null()).otherwise(V.from_timestamp(truncated))
    errors = [date.error, zone.error] + ([bins_arg.error] if bins_arg else [])
    return result(value, *errors, own=when_all(checks), kinds={"date", "null"})


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$dateAdd": _date_arith,
    "$dateSubtract": _date_arith,
    "$dateDiff": date_diff,
    "$dateTrunc": date_trunc,
}
