"""MQL truthiness and cross-type ordering, on the value encoding of `values`.

Values compare by BSON type rank first (missing < null < numbers < strings < objects <
arrays < binData < objectId < bool < date), then by value within the rank.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql.kinds import INTEGRAL_TYPES, NUMERIC_TYPES, Kind, kind_in
from pipeline_stages._mql.values import (
    TYPE_RANK,
    as_bool,
    as_double,
    as_epoch_ms,
    as_long,
    as_string,
)


def truthy(value: Column, kind: Kind = None) -> Column:
    """MQL truthiness as a Spark BOOLEAN (never NULL).

    False, null, missing and numeric zero are false; everything else is true.
    """
    if isinstance(kind, str):
        if kind in ("missing", "null"):
            return F.lit(False)
        if kind == "bool":
            return F.coalesce(as_bool(value, kind), F.lit(False))
        if kind in NUMERIC_TYPES:
            return F.coalesce(as_double(value, kind) != 0, F.lit(False))
        return F.lit(True)
    kind = K.kind_or_computed(value, kind)
    return (
        F.when(kind.isin("missing", "null"), F.lit(False))
        .when(kind == "bool", F.coalesce(as_bool(value, "bool"), F.lit(False)))
        .when(kind.isin(*NUMERIC_TYPES), F.coalesce(as_double(value, kind) != 0, F.lit(False)))
        .otherwise(F.lit(True))
    )


def type_rank(value: Column, kind: Kind = None) -> Column:
    """The BSON comparison rank of a value's type (see `TYPE_RANK`)."""
    if isinstance(kind, str):
        return F.lit(TYPE_RANK.get(kind, TYPE_RANK["unknown"]))
    kind = K.kind_or_computed(value, kind)
    pairs = [item for name, rank in TYPE_RANK.items() for item in (F.lit(name), F.lit(rank))]
    return F.coalesce(F.create_map(*pairs)[kind], F.lit(TYPE_RANK["unknown"]))


def _sign(a: Column, b: Column) -> Column:
    return F.when(a < b, F.lit(-1)).when(a > b, F.lit(1)).otherwise(F.lit(0))


def _same_rank_compare(
    left: Column, right: Column, lk: Kind, rk: Kind, rank: Column, static_rank: int | None
) -> Column:
    """Compare two values of the same rank; `static_rank` prunes the other type branches."""
    both_integral = kind_in(lk, INTEGRAL_TYPES) & kind_in(rk, INTEGRAL_TYPES)
    branches: dict[int, Callable[[], Column]] = {
        TYPE_RANK["null"]: lambda: F.lit(0),
        TYPE_RANK["missing"]: lambda: F.lit(0),
        TYPE_RANK["int"]: lambda: F.when(
            both_integral, _sign(as_long(left, lk), as_long(right, rk))
        ).otherwise(_sign(as_double(left, lk), as_double(right, rk))),
        TYPE_RANK["string"]: lambda: _sign(as_string(left, "string"), as_string(right, "string")),
        TYPE_RANK["bool"]: lambda: _sign(
            as_bool(left, "bool").cast("int"), as_bool(right, "bool").cast("int")
        ),
        TYPE_RANK["date"]: lambda: _sign(as_epoch_ms(left, "date"), as_epoch_ms(right, "date")),
    }
    fallback = _sign(F.to_json(left), F.to_json(right))
    if static_rank is not None:
        return branches[static_rank]() if static_rank in branches else fallback
    expr = F.when(rank <= TYPE_RANK["null"], F.lit(0))
    for code in (TYPE_RANK["int"], TYPE_RANK["string"], TYPE_RANK["bool"], TYPE_RANK["date"]):
        expr = expr.when(rank == code, branches[code]())
    return expr.otherwise(fallback)


def compare(left: Column, right: Column, left_kind: Kind = None, right_kind: Kind = None) -> Column:
    """MQL comparison of two values: -1, 0 or 1 (an INT column, never NULL).

    Types compare by BSON rank first (missing < null < numbers < strings < objects < arrays
    < binData < objectId < bool < date); numbers by value (int/long exactly, otherwise as
    doubles), strings by UTF-8 bytes, dates by instant, booleans false < true. Objects and
    arrays compare by their Extended JSON text, an approximation of BSON's field-by-field
    comparison that agrees on equality of equal documents. Pass the operands' kinds (a
    static name when known) to keep the generated code small.
    """
    lk = left_kind if left_kind is not None else K.kind_of(left)
    rk = right_kind if right_kind is not None else K.kind_of(right)
    rank_l, rank_r = type_rank(left, lk), type_rank(right, rk)
    static = [TYPE_RANK.get(k, TYPE_RANK["unknown"]) for k in (lk, rk) if isinstance(k, str)]
    if len(static) == 2 and static[0] != static[1]:
        return _sign(rank_l, rank_r)
    same = _same_rank_compare(left, right, lk, rk, rank_l, static[0] if static else None)
    return F.when(rank_l != rank_r, _sign(rank_l, rank_r)).otherwise(same)


def equals(left: Column, right: Column, left_kind: Kind = None, right_kind: Kind = None) -> Column:
    """MQL equality (`$eq` in expressions) as a Spark BOOLEAN (missing is not null)."""
    return compare(left, right, left_kind, right_kind) == 0
