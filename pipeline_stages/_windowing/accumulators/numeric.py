"""Numeric `$group` accumulators: `$sum`, `$avg`, `$stdDevPop`, `$stdDevSamp`, `$median`,
`$percentile`.

Sums are kept *exactly* (ints as ints, doubles and decimals as one exact rational) and rounded
once at the end. MongoDB accumulates doubles in a double-double (~106 bits), so its result is
the exactly rounded sum except in rare cancellation cases; exact sums are what make
`merge(partials)` equal to adding everything, whatever the micro-batch split.

`$median`/`$percentile` with `method: "approximate"` return the *discrete* percentile of all
numeric inputs: sorted value at 0-based rank `ceil(n * p) - 1` (clamped to `[0, n - 1]`, p >= 1
giving the max), as doubles. MongoDB's `$group` uses a t-digest whose centroids all have weight
1 on small groups, and then returns exactly this value (`TDigest::computePercentile` returns a
weight-1 centroid's mean at `computeTrueRank(n, p)`). On large groups (thousands of values),
where the t-digest starts merging centroids, MongoDB interpolates and may differ slightly;
Sluice stays exact and order-independent. NaN inputs are ignored, as the t-digest does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any, ClassVar

from bson import Int64
from typing_extensions import override

from pipeline_stages._documents.values import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, mql_type
from pipeline_stages._windowing.accumulators.base import Accumulator

_WIDTH = {"int": 0, "long": 1, "double": 2, "decimal": 3}
_DECIMAL_CONTEXT = Context(prec=34)  # IEEE 754 decimal128, MongoDB's decimal


class _ExactSum:
    """Exact running sum of numeric values; a JSON-able list in dumps.

    `[count, int_sum, frac_num, frac_den, nan, pos_inf, neg_inf, widest]`: ints summed exactly,
    finite doubles and decimals summed as one `Fraction`, non-finite doubles counted.
    """

    @staticmethod
    def init() -> list[int]:
        return [0, 0, 0, 1, 0, 0, 0, 0]

    @staticmethod
    def add(state: list[int], value: Any) -> bool:
        """Fold a value in; returns False (and leaves the state) when it is not a number."""
        kind = mql_type(value)
        width = _WIDTH.get(kind)
        if width is None:
            return False
        state[0] += 1
        state[7] = max(state[7], width)
        if width <= 1:
            state[1] += int(value)
        elif value != value:
            state[4] += 1
        elif math.isinf(value):
            state[5 if value > 0 else 6] += 1
        else:
            total = Fraction(state[2], state[3]) + Fraction(value)
            state[2], state[3] = total.numerator, total.denominator
        return True

    @staticmethod
    def merge(left: list[int], right: list[int]) -> list[int]:
        total = Fraction(left[2], left[3]) + Fraction(right[2], right[3])
        return [
            left[0] + right[0],
            left[1] + right[1],
            total.numerator,
            total.denominator,
            left[4] + right[4],
            left[5] + right[5],
            left[6] + right[6],
            max(left[7], right[7]),
        ]

    @staticmethod
    def non_finite(state: list[int]) -> float | None:
        """The IEEE result when NaN or infinities were summed, else None."""
        if state[4] or (state[5] and state[6]):
            return math.nan
        if state[5]:
            return math.inf
        if state[6]:
            return -math.inf
        return None

    @staticmethod
    def exact(state: list[int]) -> Fraction:
        return state[1] + Fraction(state[2], state[3])


def _to_double(value: Fraction | int) -> float:
    """Round to the nearest double; beyond the double range the IEEE result is an infinity."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _as_double_or_decimal(value: Fraction, widest: int) -> Any:
    if widest == 3:
        return _DECIMAL_CONTEXT.divide(Decimal(value.numerator), Decimal(value.denominator))
    return _to_double(value)


class _SumState(Accumulator):
    """`$sum` and `$avg` fold into the same exact sum (`_ExactSum`); they finalize apart."""

    def init(self) -> list[int]:
        return _ExactSum.init()

    @override
    def add(
        self, state: list[int], value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        _ExactSum.add(state, value)
        return state

    def merge(self, left: list[int], right: list[int]) -> list[int]:
        return _ExactSum.merge(left, right)


class Sum(_SumState):
    """`$sum`: non-numbers ignored; ints stay int, become long past 32 bits and double past 64
    bits; any double makes the result double, any decimal makes it decimal; 0 when empty."""

    op = "$sum"

    def finalize(self, state: list[int]) -> Any:
        widest = state[7]
        if widest <= 1:
            total = state[1]
            if widest == 0 and INT32_MIN <= total <= INT32_MAX:
                return total
            if INT64_MIN <= total <= INT64_MAX:
                return Int64(total)
            return _to_double(total)
        special = _ExactSum.non_finite(state)
        if special is not None:
            return special
        return _as_double_or_decimal(_ExactSum.exact(state), widest)


class Avg(_SumState):
    """`$avg`: mean of the numeric inputs as a double (decimal if any decimal); null if none."""

    op = "$avg"

    def finalize(self, state: list[int]) -> Any:
        if state[0] == 0:
            return None
        special = _ExactSum.non_finite(state)
        if special is not None:
            return special
        return _as_double_or_decimal(_ExactSum.exact(state) / state[0], state[7])


class _StdDev(Accumulator):
    """Standard deviation over numeric inputs, from exact `n`, `Σx` and `Σx²`.

    State: `[n, s1_num, s1_den, s2_num, s2_den, non_finite]`. The result is a double; any
    NaN or infinity makes it NaN.
    """

    sample: ClassVar[bool]

    def init(self) -> list[int]:
        return [0, 0, 1, 0, 1, 0]

    @override
    def add(
        self, state: list[int], value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        if mql_type(value) not in _WIDTH:
            return state
        if isinstance(value, float | Decimal) and not math.isfinite(value):
            state[0] += 1
            state[5] = 1
            return state
        x = Fraction(value)
        s1 = Fraction(state[1], state[2]) + x
        s2 = Fraction(state[3], state[4]) + x * x
        state[:5] = [state[0] + 1, s1.numerator, s1.denominator, s2.numerator, s2.denominator]
        return state

    def merge(self, left: list[int], right: list[int]) -> list[int]:
        s1 = Fraction(left[1], left[2]) + Fraction(right[1], right[2])
        s2 = Fraction(left[3], left[4]) + Fraction(right[3], right[4])
        return [
            left[0] + right[0],
            s1.numerator,
            s1.denominator,
            s2.numerator,
            s2.denominator,
            max(left[5], right[5]),
        ]

    def finalize(self, state: list[int]) -> float | None:
        n = state[0]
        if n == 0 or (self.sample and n < 2):
            return None
        if state[5]:
            return math.nan
        s1, s2 = Fraction(state[1], state[2]), Fraction(state[3], state[4])
        variance = (s2 - s1 * s1 / n) / (n - 1 if self.sample else n)
        return math.sqrt(_to_double(variance))


class StdDevPop(_StdDev):
    """`$stdDevPop`: null when there is no numeric input."""

    op = "$stdDevPop"
    sample = False


class StdDevSamp(_StdDev):
    """`$stdDevSamp`: null when there are fewer than two numeric inputs."""

    op = "$stdDevSamp"
    sample = True


def _parse_quantile_spec(op: str, spec: Any, *, with_p: bool) -> list[float]:
    if not isinstance(spec, dict):
        raise ValueError(f"{op} specification must be an object; found {spec!r}")
    allowed = {"input", "method", "p"} if with_p else {"input", "method"}
    unknown = set(spec) - allowed
    if unknown or "input" not in spec or "method" not in spec:
        raise ValueError(f"{op} requires exactly the fields {sorted(allowed)}; got {sorted(spec)}")
    if spec["method"] != "approximate":
        raise ValueError("Currently only 'approximate' can be used as percentile 'method'.")
    if not with_p:
        return [0.5]
    ps = spec.get("p")
    if (
        not isinstance(ps, list)
        or not ps
        or any(mql_type(p) not in _WIDTH or not 0 <= p <= 1 for p in ps)
    ):
        raise ValueError(
            f"The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: {ps!r}"
        )
    return [float(p) for p in ps]


def discrete_percentile(sorted_values: list[float], p: float) -> float:
    """MongoDB's `computeTrueRank`: value at rank `ceil(n*p) - 1`, clamped; p >= 1 is the max."""
    n = len(sorted_values)
    rank = n - 1 if p >= 1.0 else max(0, math.ceil(n * p) - 1)
    return sorted_values[rank]


class Percentile(Accumulator):
    """`$percentile: {input, p, method: "approximate"}` -> array of doubles (nulls if no input)."""

    op = "$percentile"
    scalar: ClassVar[bool] = False

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self.ps = _parse_quantile_spec(self.op, spec, with_p=not self.scalar)

    @property
    def input_expr(self) -> Any:
        return self.spec["input"]

    def init(self) -> list[float]:
        return []

    @override
    def add(
        self, state: list[float], value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        if mql_type(value) in _WIDTH and value == value:
            state.append(float(value))
        return state

    def merge(self, left: list[float], right: list[float]) -> list[float]:
        return left + right

    def finalize(self, state: list[float]) -> Any:
        values = sorted(state)
        results = [discrete_percentile(values, p) if values else None for p in self.ps]
        return results[0] if self.scalar else results


class Median(Percentile):
    """`$median: {input, method: "approximate"}` -> a double, or null if no numeric input."""

    op = "$median"
    scalar = True


CLASSES: tuple[type[Accumulator], ...] = (Sum, Avg, StdDevPop, StdDevSamp, Percentile, Median)
