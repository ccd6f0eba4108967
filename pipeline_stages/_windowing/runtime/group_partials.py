"""Vectorised `$group` partials: one micro-batch's inputs folded per group with numpy.

`fold_batch` computes, for every (window, group key) a batch touches, the partial state each
accumulator would reach by adding that group's documents in arrival order, then merges it into
the window's state with the accumulator's own `merge`. The states are exactly those of
`_windowing.accumulators` (the classes the reference model runs), so results do not depend on
how documents were cut into batches.

Fast paths exist for `$count`, `$sum`/`$avg` (exact sums: doubles are decomposed into integer
mantissas and summed in int64 per group, so no rounding happens before `finalize`), `$min`/`$max`
on numbers, `$first`/`$last`, `$push` and single-key `$top`/`$bottom` on numbers. Any other
accumulator, and any group holding values a fast path does not cover (strings, dates, NaN,
decimals…), goes through the accumulator's `add` one document at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pipeline_stages._documents.values import MISSING, set_path
from pipeline_stages._windowing.accumulators.base import Accumulator
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.values import decode_json

IntArray = npt.NDArray[np.int64]
_EXACT = 2**53
_INT32 = 2**31


class Inputs:
    """The typed columns of one accumulator input, gathered for the batch's items."""

    def __init__(self, df: pd.DataFrame, columns: C.ValueColumns, rows: IntArray) -> None:
        k, i, d, j = columns.names
        self.code = df[k].to_numpy()[rows]
        self.ints = df[i].to_numpy()[rows]
        self.doubles = df[d].to_numpy()[rows]
        self.texts = df[j].to_numpy()[rows]

    def value(self, n: int) -> Any:
        """The MQL value of item `n` (MISSING when missing)."""
        code = self.code[n]
        if code == C.CODE_INT:
            return int(self.ints[n])
        if code == C.CODE_DOUBLE:
            return float(self.doubles[n])
        if code == C.CODE_MISSING:
            return MISSING
        return decode_json(self.texts[n])

    def numeric(
        self,
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """`(is_number, as_float, bad)`: numbers exact as doubles, and items that need the
        generic path (NaN, huge ints, JSON values other than null)."""
        is_int = self.code == C.CODE_INT
        is_double = self.code == C.CODE_DOUBLE
        floats = np.where(is_int, self.ints.astype(np.float64), self.doubles)
        bad = (is_int & (np.abs(self.ints) > _EXACT)) | (is_double & np.isnan(self.doubles))
        bad |= (self.code == C.CODE_JSON) & (self.texts != "null")
        return is_int | is_double, floats, bad


def first_per_group(g: IntArray, keys: list[Any]) -> IntArray:
    """Index of the first item per group after sorting by `keys` (last key is primary)."""
    order = np.lexsort([*keys, g])
    starts = np.flatnonzero(np.r_[True, g[order][1:] != g[order][:-1]])
    return order[starts]


# --------------------------------------------------------------------------- fast paths


def _count(acc: Accumulator, inputs: list[Inputs], g: IntArray, n: int, orders: IntArray) -> Any:  # noqa: ARG001
    return np.bincount(g, minlength=n).tolist(), np.zeros(n, dtype=bool)


def _exact_sums(
    acc: Accumulator,  # noqa: ARG001 - the fast-path signature
    inputs: list[Inputs],
    g: IntArray,
    n: int,
    orders: IntArray,  # noqa: ARG001
) -> Any:
    """`_ExactSum` states `[count, int_sum, num, den, nan, +inf, -inf, widest]` per group."""
    x = inputs[0]
    is_int, is_double = x.code == C.CODE_INT, x.code == C.CODE_DOUBLE
    count = np.bincount(g[is_int | is_double], minlength=n)
    ints, gi = x.ints[is_int], g[is_int]
    widest = np.full(n, -1)
    np.maximum.at(widest, gi, np.where(np.abs(ints) >= _INT32, 1, 0))
    np.maximum.at(widest, g[is_double], 2)
    magnitude = np.zeros(n)
    np.add.at(magnitude, gi, np.abs(ints).astype(np.float64))
    int_sum = np.zeros(n, dtype=np.int64)
    np.add.at(int_sum, gi, ints)
    fallback = magnitude >= 2.0**62  # int64 sums may have wrapped: redo those groups exactly
    doubles, gd = x.doubles[is_double], g[is_double]
    nan = np.bincount(gd[np.isnan(doubles)], minlength=n)
    pos = np.bincount(gd[np.isposinf(doubles)], minlength=n)
    neg = np.bincount(gd[np.isneginf(doubles)], minlength=n)
    nums, dens = fraction_sums(doubles, gd, n)
    fallback |= np.bincount(g[x.code == C.CODE_JSON], minlength=n) > 0
    columns = (count, int_sum, nan, pos, neg, np.maximum(widest, 0))
    states = [
        [c, i, num, den, na, p, ng, w]
        for c, i, num, den, na, p, ng, w in zip(
            *(column.tolist() for column in columns[:2]), nums, dens,
            *(column.tolist() for column in columns[2:]), strict=True,
        )
    ]  # fmt: skip
    return states, fallback


#: Bits of headroom for the vectorised exact sums (see `fraction_sums`).
_MANTISSA_BITS = 53
_HALF = 26


def fraction_sums(
    doubles: npt.NDArray[np.float64], groups: IntArray, n: int
) -> tuple[list[int], list[int]]:
    """Exact sum of the finite doubles of each of `n` groups, as reduced `(num, den)` lists.

    Each double is `whole * 2**e` with a 53-bit integer `whole`. Per group, every term is
    shifted to the group's smallest exponent and its two halves (27 and 26 bits) summed in
    int64, which is exact while `27 + shift + log2(count) < 63`; the few groups whose
    exponents spread wider go through `_fraction_sums_by_exponent`. One Python big-integer
    step per group is left (measured: 125k doubles in 13k groups, 0.15 s -> 0.03 s).
    """
    nums, dens = [0] * n, [1] * n
    finite = np.isfinite(doubles) & (doubles != 0)
    if not finite.any():
        return nums, dens
    values, g = doubles[finite], groups[finite]
    mantissa, exponent = np.frexp(values)
    whole = (mantissa * 2.0**_MANTISSA_BITS).astype(np.int64)
    exp = exponent.astype(np.int64) - _MANTISSA_BITS
    big = np.iinfo(np.int64).max
    base = np.full(n, big, dtype=np.int64)
    np.minimum.at(base, g, exp)
    shift = exp - base[g]
    top = np.zeros(n, dtype=np.int64)
    np.maximum.at(top, g, shift)
    counts = np.bincount(g, minlength=n)
    wide = top + np.ceil(np.log2(counts + 1)).astype(np.int64) > 62 - (_MANTISSA_BITS - _HALF + 1)
    narrow = ~wide[g]
    shift = np.where(narrow, shift, 0)
    high = np.zeros(n, dtype=np.int64)
    low = np.zeros(n, dtype=np.int64)
    np.add.at(high, g[narrow], (whole[narrow] >> _HALF) << shift[narrow])
    np.add.at(low, g[narrow], (whole[narrow] & ((1 << _HALF) - 1)) << shift[narrow])
    present = np.flatnonzero(counts > 0)
    for group, h, lo, b in zip(
        present.tolist(),
        high[present].tolist(),
        low[present].tolist(),
        base[present].tolist(),
        strict=True,
    ):
        nums[group], dens[group] = _reduced((h << _HALF) + lo, b)
    if wide.any():
        rows = np.flatnonzero(wide[g])
        for group, frac in _fraction_sums_by_exponent(values[rows], g[rows]).items():
            nums[group], dens[group] = frac.numerator, frac.denominator
    return nums, dens


def _reduced(numerator: int, exponent: int) -> tuple[int, int]:
    """`numerator * 2**exponent` as a reduced fraction (what `Fraction` would give)."""
    if numerator == 0:
        return 0, 1
    if exponent >= 0:
        return numerator << exponent, 1
    zeros = min((numerator & -numerator).bit_length() - 1, -exponent)
    return numerator >> zeros, 1 << (-exponent - zeros)


def _fraction_sums_by_exponent(
    doubles: npt.NDArray[np.float64], groups: IntArray
) -> dict[int, Fraction]:
    """Exact sum of the finite doubles of each group, as a Fraction, exponent by exponent:
    any spread of exponents (`fraction_sums`' fallback).

    Each double is `mantissa * 2**exponent` with a 53-bit integer mantissa; mantissas split in
    two 26/27-bit halves sum exactly in float64 per (group, exponent), which leaves a few
    Python big-integer additions per group.
    """
    finite = np.isfinite(doubles)
    if not finite.any():
        return {}
    mantissa, exponent = np.frexp(doubles[finite])
    whole = (mantissa * 2.0**53).astype(np.int64)
    high, low = whole >> 26, whole & ((1 << 26) - 1)
    key = groups[finite] * 4096 + (exponent.astype(np.int64) - 53 + 2100)
    keys, inverse = np.unique(key, return_inverse=True)
    high_sums = np.bincount(inverse, weights=high.astype(np.float64))
    low_sums = np.bincount(inverse, weights=low.astype(np.float64))
    terms: dict[int, list[tuple[int, int]]] = {}
    for k, hs, ls in zip(keys.tolist(), high_sums.tolist(), low_sums.tolist(), strict=True):
        group, exp = divmod(k, 4096)
        terms.setdefault(group, []).append(((int(hs) << 26) + int(ls), exp - 2100))
    sums = {}
    for group, parts in terms.items():
        base = min(exp for _, exp in parts)
        numerator = sum(total << (exp - base) for total, exp in parts)
        sums[group] = Fraction(numerator << base) if base >= 0 else Fraction(numerator, 1 << -base)
    return sums


def _extreme(acc: Accumulator, inputs: list[Inputs], g: IntArray, n: int, orders: IntArray) -> Any:
    """`$min`/`$max` of numbers: `[order, value]`, the earliest on ties."""
    is_number, floats, bad = inputs[0].numeric()
    fallback = np.bincount(g[bad], minlength=n) > 0
    states: list[Any] = [None] * n
    candidates = np.flatnonzero(is_number & ~bad)
    if len(candidates):
        sign = 1.0 if acc.op == "$min" else -1.0
        picked = first_per_group(g[candidates], [orders[candidates], sign * floats[candidates]])
        for item in candidates[picked].tolist():
            states[int(g[item])] = [int(orders[item]), inputs[0].value(item)]
    return states, fallback


def _first_last(
    acc: Accumulator, inputs: list[Inputs], g: IntArray, n: int, orders: IntArray
) -> Any:
    latest = acc.op == "$last"
    picked = first_per_group(g, [-orders if latest else orders])
    states: list[Any] = [None] * n
    for item in picked.tolist():
        value = inputs[0].value(item)
        states[int(g[item])] = [int(orders[item]), None if value is MISSING else value]
    return states, np.zeros(n, dtype=bool)


def _push(acc: Accumulator, inputs: list[Inputs], g: IntArray, n: int, orders: IntArray) -> Any:  # noqa: ARG001
    """`$push`: each group's `(order, value)` pairs in arrival order, missing values left out."""
    x = inputs[0]
    states: list[Any] = [[] for _ in range(n)]
    keep = np.flatnonzero(x.code != C.CODE_MISSING)
    if not len(keep):
        return states, np.zeros(n, dtype=bool)
    order = keep[np.lexsort([orders[keep], g[keep]])]
    codes = x.code[order]
    if (codes == C.CODE_DOUBLE).all():
        values = x.doubles[order].tolist()
    elif (codes == C.CODE_INT).all():
        values = x.ints[order].tolist()
    else:
        values = [x.value(item) for item in order.tolist()]
    sorted_groups = g[order]
    bounds = np.flatnonzero(np.r_[True, sorted_groups[1:] != sorted_groups[:-1], True])
    order_list = orders[order].tolist()
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        states[int(sorted_groups[a])] = list(zip(order_list[a:b], values[a:b], strict=True))
    return states, np.zeros(n, dtype=bool)


def _top_bottom(
    acc: Accumulator, inputs: list[Inputs], g: IntArray, n: int, orders: IntArray
) -> Any:
    """Single-key `$top`/`$bottom` over numeric sort values."""
    fields: tuple[tuple[str, int], ...] = getattr(acc, "sort_fields", ())
    if getattr(acc, "many", True) or len(fields) != 1:
        return [None] * n, np.ones(n, dtype=bool)
    is_number, floats, bad = inputs[1].numeric()
    fallback = np.bincount(g[bad | ~is_number], minlength=n) > 0
    direction = fields[0][1]
    bottom = bool(getattr(acc, "bottom", False))
    # Entries sort by (direction * value, arrival); $top keeps the first, $bottom the last.
    keys = direction * floats
    picked = first_per_group(g, [-orders, -keys] if bottom else [orders, keys])
    states: list[Any] = [None] * n
    for item in picked.tolist():
        output = inputs[0].value(item)
        entry = [[inputs[1].value(item)], int(orders[item]), None if output is MISSING else output]
        states[int(g[item])] = [entry]
    return states, fallback


FastPath = Callable[[Accumulator, list[Inputs], IntArray, int, IntArray], Any]
FAST: dict[str, FastPath] = {
    "$count": _count,
    "$sum": _exact_sums,
    "$avg": _exact_sums,
    "$min": _extreme,
    "$max": _extreme,
    "$first": _first_last,
    "$last": _first_last,
    "$push": _push,
    "$top": _top_bottom,
    "$bottom": _top_bottom,
}


# --------------------------------------------------------------------------- generic


def _generic(
    acc: Accumulator,
    plan: C.AccumulatorPlan,
    inputs: list[Inputs],
    g: IntArray,
    orders: IntArray,
    groups: npt.NDArray[np.bool_],
    states: list[Any],
) -> None:
    """Fold the items of the flagged groups one by one with `acc.add`."""
    items = np.flatnonzero(groups[g])
    for group in np.flatnonzero(groups).tolist():
        states[group] = acc.init()
    for item in items[np.argsort(orders[items], kind="stable")].tolist():
        group = int(g[item])
        value = inputs[0].value(item) if inputs else MISSING
        doc: dict[str, Any] | None = None
        if len(inputs) > 1:
            doc = {}
            for name, x in zip(plan.sort_fields, inputs[1:], strict=True):
                field_value = x.value(item)
                if field_value is not MISSING:
                    set_path(doc, name, field_value)
        states[group] = acc.add(states[group], value, order=int(orders[item]), doc=doc)


def partials(
    acc: Accumulator,
    plan: C.AccumulatorPlan,
    df: pd.DataFrame,
    rows: IntArray,
    g: IntArray,
    n: int,
    orders: IntArray,
    memo: dict[Any, Any] | None = None,
) -> list[Any]:
    """Each group's partial state for one accumulator (items: `rows`, `g`, `orders`).

    `memo` shares a fast path's result between accumulators with the same state over the same
    input (`$sum` and `$avg` of one expression keep the same exact sum).
    """
    inputs = [Inputs(df, columns, rows) for columns in plan.inputs]
    fast = FAST.get(acc.op)
    states: list[Any]
    if fast is None:
        states, fallback = [None] * n, np.ones(n, dtype=bool)
    elif fast is _exact_sums and memo is not None:
        key = (fast, tuple(c.prefix for c in plan.inputs))
        if key not in memo:
            memo[key] = fast(acc, inputs, g, n, orders)
        shared, fallback = memo[key]
        states = [list(state) for state in shared]
    else:
        states, fallback = fast(acc, inputs, g, n, orders)
    if fallback.any():
        _generic(acc, plan, inputs, g, orders, fallback, states)
    return states
