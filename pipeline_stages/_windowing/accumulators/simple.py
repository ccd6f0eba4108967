"""The simple `$group` accumulators: `$count`, `$min`, `$max`, `$first`, `$last`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from typing_extensions import override

from pipeline_stages._documents.values import MISSING, compare, is_nullish
from pipeline_stages._windowing.accumulators.base import Accumulator, null_if_missing


class Count(Accumulator):
    """`$count: {}`: the number of documents (an int)."""

    op = "$count"

    @property
    def input_expr(self) -> Any:
        return MISSING

    def init(self) -> int:
        return 0

    @override
    def add(
        self, state: int, value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> int:
        return state + 1

    def merge(self, left: int, right: int) -> int:
        return left + right

    def finalize(self, state: int) -> int:
        return state


class _Extreme(Accumulator):
    """`$min`/`$max`: BSON order, null and missing ignored, null when nothing is left.

    Equal values (1 and 1.0) keep the earliest arrival, as MongoDB keeps the current extreme
    unless a strictly smaller/greater value arrives.
    """

    sign: ClassVar[int]

    def init(self) -> list[Any] | None:
        return None

    @override
    def add(
        self, state: Any, value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        if is_nullish(value):
            return state
        return self._better(state, [order, value])

    def _better(self, state: Any, candidate: list[Any]) -> Any:
        if state is None:
            return candidate
        cmp = compare(candidate[1], state[1]) * self.sign
        if cmp < 0 or (cmp == 0 and candidate[0] < state[0]):
            return candidate
        return state

    def merge(self, left: Any, right: Any) -> Any:
        return left if right is None else self._better(left, right)

    def finalize(self, state: Any) -> Any:
        return None if state is None else state[1]


class Min(_Extreme):
    """`$min`."""

    op = "$min"
    sign = 1


class Max(_Extreme):
    """`$max`."""

    op = "$max"
    sign = -1


class First(Accumulator):
    """`$first`: the value of the earliest document; missing becomes null."""

    op = "$first"
    latest: ClassVar[bool] = False

    def init(self) -> list[Any] | None:
        return None

    @override
    def add(
        self, state: Any, value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        return self.merge(state, [order, null_if_missing(value)])

    def merge(self, left: Any, right: Any) -> Any:
        if left is None or right is None:
            return right if left is None else left
        right_wins = right[0] > left[0] if self.latest else right[0] < left[0]
        return right if right_wins else left

    def finalize(self, state: Any) -> Any:
        return None if state is None else state[1]


class Last(First):
    """`$last`: the value of the latest document; missing becomes null."""

    op = "$last"
    latest = True
