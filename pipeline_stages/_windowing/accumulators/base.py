"""The accumulator contract: `$group` accumulators as incremental, mergeable, JSON-serialisable partial states.

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
from typing import Any, ClassVar

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import MISSING, to_ejson


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


def null_if_missing(value: Any) -> Any:
    return None if value is MISSING else value
