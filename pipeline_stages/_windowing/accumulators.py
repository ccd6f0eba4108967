"""`$group` accumulators as incremental, mergeable, JSON-serialisable partial states.

Each accumulator is a small immutable object holding its static parameters (`n`, `sortBy`,
`p`) and four pure-ish operations over a *state*:

* `init()` -> a fresh state;
* `add(state, value, order=..., doc=...)` -> state with one input folded in (may mutate);
* `merge(left, right)` -> the state of both inputs together;
* `finalize(state)` -> the MQL result.

`value` is the evaluated argument expression (`input_expr`); evaluating it is the caller's
job (the Spark operator's compiled expression, or the conformance suite's mini evaluator).
`order` is the document's arrival sequence number inside the window: it decides `$first`,
`$last`, `$push` order and tie-breaks, and it is kept in the state so that merging partials in
any grouping gives the result of adding everything in arrival order. `dump`/`load` turn a
state into JSON-able data and back, for keeping partials in Spark state between micro-batches.

MongoDB semantics followed (accumulator sources in mongodb/mongo `src/mongo/db/pipeline`):
missing inputs are skipped by `$push`/`$addToSet`, `$first`/`$last` of missing give null,
`$min`/`$max` ignore null and missing, numeric accumulators ignore non-numbers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from typing_extensions import override

from pipeline_stages._mql.pyvalues import (
    MISSING,
    compare,
    from_ejson,
    is_nullish,
    to_ejson,
)


class Accumulator(ABC):
    """One `$group` output field's accumulator; see the module docstring for the contract."""

    op: ClassVar[str]

    def __init__(self, spec: Any) -> None:
        self.spec = spec

    @property
    def input_expr(self) -> Any:
        """The expression evaluated per document and passed to `add` as `value`."""
        return self.spec

    @abstractmethod
    def init(self) -> Any:
        """A fresh, empty state."""

    def validate(self, value: Any) -> None:  # noqa: B027 - optional hook, no-op by default
        """Raise `MqlError` if `value` must send its document to the DLQ.

        Called for every accumulator of a `$group` before any `add`, so a failing document is
        excluded from all of them (atlas-semantics.md §11 Q4).
        """

    @abstractmethod
    def add(
        self, state: Any, value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        """Fold one document's `value` into `state` and return the state."""

    @abstractmethod
    def merge(self, left: Any, right: Any) -> Any:
        """Combine two partial states."""

    @abstractmethod
    def finalize(self, state: Any) -> Any:
        """The accumulator's result for `state` (MISSING is never returned)."""

    def dump(self, state: Any) -> Any:
        """The state as JSON-able data (relaxed Extended JSON for MQL values inside)."""
        return to_ejson(state)

    def load(self, data: Any) -> Any:
        """Inverse of `dump`."""
        return from_ejson(data)

    def result_of(self, values: list[Any]) -> Any:
        """Convenience: add `values` in order from a fresh state and finalize."""
        state = self.init()
        for order, value in enumerate(values):
            state = self.add(state, value, order=order)
        return self.finalize(state)


def _null_if_missing(value: Any) -> Any:
    return None if value is MISSING else value


# --------------------------------------------------------------------------- simple ones


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
        return self.merge(state, [order, _null_if_missing(value)])

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


# --------------------------------------------------------------------------- registry


def _registry() -> dict[str, type[Accumulator]]:
    from pipeline_stages._windowing import acc_collect, acc_numeric, acc_ordered

    classes: list[type[Accumulator]] = [
        Count,
        Min,
        Max,
        First,
        Last,
        *acc_collect.CLASSES,
        *acc_numeric.CLASSES,
        *acc_ordered.CLASSES,
    ]
    return {cls.op: cls for cls in classes}


def accumulator_ops() -> frozenset[str]:
    """Every supported accumulator operator name."""
    return frozenset(_registry())


def make_accumulator(op: str, spec: Any) -> Accumulator:
    """Build the accumulator for `{op: spec}`.

    Raises:
        ValueError: unknown operator or invalid static parameters (`n`, `sortBy`, `p`, ...),
            with MongoDB's wording where it has one.
    """
    cls = _registry().get(op)
    if cls is None:
        raise ValueError(f"Unknown group operator '{op}'")
    return cls(spec)


@dataclass(frozen=True)
class GroupSpec:
    """A parsed `$group` body: the `_id` expression and the output fields in order."""

    id_expr: Any
    fields: tuple[tuple[str, Accumulator], ...]


def parse_group(spec: Mapping[str, Any]) -> GroupSpec:
    """Parse `{_id: <expr>, <field>: {<$acc>: <arg>}, ...}`.

    Raises:
        ValueError: missing `_id`, a dotted field name, or a field that is not a single
            accumulator object.
    """
    if "_id" not in spec:
        raise ValueError("a group specification must include an _id")
    fields = []
    for name, body in spec.items():
        if name == "_id":
            continue
        if "." in name:
            raise ValueError(f"the group aggregate field name '{name}' cannot contain '.'")
        if not isinstance(body, dict) or len(body) != 1:
            raise ValueError(
                f"the group aggregate field '{name}' must be defined as an expression inside an object"
            )
        ((op, arg),) = body.items()
        fields.append((name, make_accumulator(op, arg)))
    return GroupSpec(id_expr=spec["_id"], fields=tuple(fields))
