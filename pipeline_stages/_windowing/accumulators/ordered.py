"""Order-based `$group` accumulators: `$top`, `$bottom`, `$topN`, `$bottomN`, `$firstN`,
`$lastN`, `$maxN`, `$minN`.

Every state is a list of entries carrying the document's arrival `order`, truncated to the `n`
best under a total order, so merging partials in any grouping keeps exactly the entries that
adding all documents in arrival order would keep.

* `$top`/`$bottom`(N) sort by `sortBy` (BSON order; an array field sorts by its smallest
  element ascending and its largest descending, an empty array below null), ties by arrival.
  `$bottomN` returns the last `n` in that same sort order. Missing outputs become null.
* `$firstN`/`$lastN` keep nulls (missing becomes null); `$maxN`/`$minN` drop null and missing;
  `$maxN` returns descending, `$minN` ascending, ties by arrival.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cmp_to_key
from typing import Any, ClassVar

from typing_extensions import override

from pipeline_stages._documents.values import MISSING, get_path, is_nullish, mql_type, sort_key
from pipeline_stages._windowing.accumulators.base import Accumulator

#: Sorts below null: where MongoDB puts an empty array in an ascending sort.
_EMPTY_ARRAY_KEY = (0.5,)


def _parse_n(op: str, spec: Mapping[str, Any]) -> int:
    n = spec.get("n", MISSING)
    if n is MISSING:
        raise ValueError(f"Missing value for 'n' in {op}")
    if mql_type(n) not in ("int", "long", "double") or n != int(n):
        raise ValueError(f"Value for 'n' must be of integral type, but found {n!r}")
    if n <= 0:
        raise ValueError(f"'n' must be greater than 0, found {n}")
    return int(n)


def _check_fields(op: str, spec: Any, allowed: set[str]) -> None:
    if not isinstance(spec, dict):
        raise ValueError(f"specification must be an object; found {spec!r}")
    missing = allowed - {"n"} - set(spec)
    unknown = set(spec) - allowed
    if unknown:
        raise ValueError(f"{op} found an unknown argument: {sorted(unknown)[0]}")
    if missing:
        raise ValueError(f"{op} requires '{sorted(missing)[0]}'")


def sort_value_key(value: Any, direction: int) -> tuple[Any, ...]:
    """The key a `$sort`/`sortBy` field value sorts by (arrays: min asc, max desc)."""
    if isinstance(value, list):
        if not value:
            return _EMPTY_ARRAY_KEY
        keys = [sort_key(e) for e in value]
        return min(keys) if direction > 0 else max(keys)
    return sort_key(None if value is MISSING else value)


def parse_sort_spec(sort_by: Any) -> tuple[tuple[str, int], ...]:
    """Validate `{field: 1 | -1, ...}` (non-empty) into `((field, direction), ...)`."""
    if not isinstance(sort_by, dict) or not sort_by:
        raise ValueError(f"sortBy must be a non-empty object, found {sort_by!r}")
    fields = []
    for name, direction in sort_by.items():
        if direction not in (1, -1) or isinstance(direction, bool):
            raise ValueError(
                f"$sort key ordering must be 1 (for ascending) or -1 (for descending), found {direction!r}"
            )
        fields.append((name, int(direction)))
    return tuple(fields)


def compare_sort_values(
    fields: tuple[tuple[str, int], ...], left: list[Any], right: list[Any]
) -> int:
    """Compare two documents' extracted sort values under a sort spec."""
    for (_, direction), a, b in zip(fields, left, right, strict=True):
        ka, kb = sort_value_key(a, direction), sort_value_key(b, direction)
        if ka != kb:
            return direction if ka > kb else -direction
    return 0


class _Bounded(Accumulator):
    """A list of entries truncated to the `n` best (`_keep`) after every add and merge."""

    n: int

    def _keep(self, entries: list[list[Any]]) -> list[list[Any]]:
        raise NotImplementedError

    def init(self) -> list[list[Any]]:
        return []

    def merge(self, left: list[list[Any]], right: list[list[Any]]) -> Any:
        return self._keep(left + right)


class _TopBottom(_Bounded):
    """Shared machinery of `$top`, `$bottom`, `$topN`, `$bottomN`.

    Entry: `[sort_values, order, output]`; the total order is sortBy then arrival.
    """

    many: ClassVar[bool]
    bottom: ClassVar[bool]

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        _check_fields(
            self.op, spec, {"sortBy", "output", "n"} if self.many else {"sortBy", "output"}
        )
        self.sort_fields = parse_sort_spec(spec["sortBy"])
        self.n = _parse_n(self.op, spec) if self.many else 1
        self._key = cmp_to_key(self._compare)

    @property
    def input_expr(self) -> Any:
        return self.spec["output"]

    def _compare(self, left: list[Any], right: list[Any]) -> int:
        cmp = compare_sort_values(self.sort_fields, left[0], right[0])
        return cmp if cmp else (left[1] > right[1]) - (left[1] < right[1])

    def _keep(self, entries: list[list[Any]]) -> list[list[Any]]:
        ordered = sorted(entries, key=self._key)
        return ordered[-self.n :] if self.bottom else ordered[: self.n]

    @override
    def add(
        self,
        state: list[list[Any]],
        value: Any,
        *,
        order: int,
        doc: Mapping[str, Any] | None = None,
    ) -> Any:
        values = [get_path(doc or {}, name) for name, _ in self.sort_fields]
        values = [None if v is MISSING else v for v in values]
        output = None if value is MISSING else value
        return self._keep([*state, [values, order, output]])

    def finalize(self, state: list[list[Any]]) -> Any:
        outputs = [entry[2] for entry in sorted(state, key=self._key)]
        if self.many:
            return outputs
        return outputs[0] if outputs else None


class Top(_TopBottom):
    """`$top: {sortBy, output}`."""

    op = "$top"
    many = False
    bottom = False


class Bottom(_TopBottom):
    """`$bottom: {sortBy, output}`."""

    op = "$bottom"
    many = False
    bottom = True


class TopN(_TopBottom):
    """`$topN: {sortBy, output, n}`."""

    op = "$topN"
    many = True
    bottom = False


class BottomN(_TopBottom):
    """`$bottomN: {sortBy, output, n}`."""

    op = "$bottomN"
    many = True
    bottom = True


class _InputN(_Bounded):
    """`{input, n}` accumulators. Entry: `[order, value]`."""

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        _check_fields(self.op, spec, {"input", "n"})
        self.n = _parse_n(self.op, spec)

    @property
    def input_expr(self) -> Any:
        return self.spec["input"]

    def finalize(self, state: list[list[Any]]) -> list[Any]:
        return [value for _, value in self._keep(state)]


class _ByArrival(_InputN):
    """`$firstN`/`$lastN`: the first or last `n` values by arrival (missing becomes null)."""

    last: ClassVar[bool]

    def _keep(self, entries: list[list[Any]]) -> list[list[Any]]:
        ordered = sorted(entries, key=lambda entry: entry[0])
        return ordered[-self.n :] if self.last else ordered[: self.n]

    @override
    def add(
        self,
        state: list[list[Any]],
        value: Any,
        *,
        order: int,
        doc: Mapping[str, Any] | None = None,
    ) -> Any:
        return self._keep([*state, [order, None if value is MISSING else value]])


class FirstN(_ByArrival):
    """`$firstN`."""

    op = "$firstN"
    last = False


class LastN(_ByArrival):
    """`$lastN`."""

    op = "$lastN"
    last = True


class _ByValue(_InputN):
    """`$maxN`/`$minN`: the `n` greatest or smallest values; null and missing are dropped."""

    descending: ClassVar[bool]

    def __init__(self, spec: Any) -> None:
        super().__init__(spec)
        self._key = cmp_to_key(self._compare)

    def _compare(self, left: list[Any], right: list[Any]) -> int:
        ka, kb = sort_key(left[1]), sort_key(right[1])
        if ka != kb:
            cmp = 1 if ka > kb else -1
            return -cmp if self.descending else cmp
        return int(left[0] > right[0]) - int(left[0] < right[0])

    def _keep(self, entries: list[list[Any]]) -> list[list[Any]]:
        return sorted(entries, key=self._key)[: self.n]

    @override
    def add(
        self,
        state: list[list[Any]],
        value: Any,
        *,
        order: int,
        doc: Mapping[str, Any] | None = None,
    ) -> Any:
        if is_nullish(value):
            return state
        return self._keep([*state, [order, value]])


class MaxN(_ByValue):
    """`$maxN`: the `n` greatest values, greatest first."""

    op = "$maxN"
    descending = True


class MinN(_ByValue):
    """`$minN`: the `n` smallest values, smallest first."""

    op = "$minN"
    descending = False


CLASSES: tuple[type[Accumulator], ...] = (
    Top,
    Bottom,
    TopN,
    BottomN,
    FirstN,
    LastN,
    MaxN,
    MinN,
)
