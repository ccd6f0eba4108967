"""Collecting `$group` accumulators: `$push`, `$addToSet`, `$mergeObjects`.

Their states grow with the input; each keeps the arrival `order` of what it holds so that
merging partials in any grouping gives the add-all result (see `accumulators`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from typing_extensions import override

from pipeline_stages._documents.ejson import from_ejson
from pipeline_stages._documents.values import (
    MISSING,
    MqlError,
    is_nullish,
    mql_type,
    repr_for_error,
    sort_key,
    to_ejson,
)
from pipeline_stages._windowing.accumulators.base import Accumulator


class Push(Accumulator):
    """`$push`: all values in document order; missing values are skipped."""

    op = "$push"

    def init(self) -> list[list[Any]]:
        return []

    @override
    def add(
        self,
        state: list[list[Any]],
        value: Any,
        *,
        order: int,
        doc: Mapping[str, Any] | None = None,
    ) -> Any:
        if value is not MISSING:
            state.append([order, value])
        return state

    def merge(self, left: list[list[Any]], right: list[list[Any]]) -> Any:
        return left + right

    def finalize(self, state: list[list[Any]]) -> list[Any]:
        return [value for _, value in sorted(state, key=lambda item: item[0])]


@dataclass
class _SetState:
    """`$addToSet` state: items by arrival plus an index from value key to item position."""

    items: list[list[Any]]
    index: dict[Any, int]


class AddToSet(Accumulator):
    """`$addToSet`: distinct values (MQL equality: 1 and 1.0 are one value), missing skipped.

    MongoDB leaves the output order unspecified; Sluice returns first-arrival order, which is
    deterministic whatever way partials were merged.
    """

    op = "$addToSet"

    def init(self) -> _SetState:
        return _SetState(items=[], index={})

    @override
    def add(
        self, state: _SetState, value: Any, *, order: int, doc: Mapping[str, Any] | None = None
    ) -> Any:
        if value is MISSING:
            return state
        key = sort_key(value)
        at = state.index.get(key)
        if at is None:
            state.index[key] = len(state.items)
            state.items.append([order, value])
        elif order < state.items[at][0]:
            state.items[at] = [order, value]
        return state

    def merge(self, left: _SetState, right: _SetState) -> _SetState:
        merged = _SetState(items=list(left.items), index=dict(left.index))
        for order, value in right.items:
            self.add(merged, value, order=order)
        return merged

    def finalize(self, state: _SetState) -> list[Any]:
        return [value for _, value in sorted(state.items, key=lambda item: item[0])]

    def dump(self, state: _SetState) -> Any:
        return to_ejson(state.items)

    def load(self, data: Any) -> _SetState:
        state = self.init()
        for order, value in from_ejson(data):
            self.add(state, value, order=order)
        return state


class MergeObjects(Accumulator):
    """`$mergeObjects`: later documents' fields win; null/missing inputs are ignored.

    Non-object inputs are errors (MongoDB code 40400), which send the document to the DLQ.
    The state keeps, per field, `[first order, position in that document, last order, value]`
    so that fields come out in first-insertion order and the latest value wins, whatever the
    merge order.
    """

    op = "$mergeObjects"

    def init(self) -> dict[str, list[Any]]:
        return {}

    def validate(self, value: Any) -> None:
        if not is_nullish(value) and not isinstance(value, dict):
            raise MqlError(
                "$mergeObjects requires object inputs, but input "
                f"{repr_for_error(value)} is of type {mql_type(value)}"
            )

    @override
    def add(
        self,
        state: dict[str, list[Any]],
        value: Any,
        *,
        order: int,
        doc: Mapping[str, Any] | None = None,
    ) -> Any:
        self.validate(value)
        if is_nullish(value):
            return state
        for position, (name, field_value) in enumerate(value.items()):
            if field_value is not MISSING:
                self._put(state, name, [order, position, order, field_value])
        return state

    @staticmethod
    def _put(state: dict[str, list[Any]], name: str, entry: list[Any]) -> None:
        old = state.get(name)
        if old is None:
            state[name] = entry
            return
        first = min(old[:2], entry[:2])
        winner = entry if entry[2] > old[2] else old
        state[name] = [*first, winner[2], winner[3]]

    def merge(self, left: dict[str, list[Any]], right: dict[str, list[Any]]) -> Any:
        merged = dict(left)
        for name, entry in right.items():
            self._put(merged, name, entry)
        return merged

    def finalize(self, state: dict[str, list[Any]]) -> dict[str, Any]:
        ordered = sorted(state.items(), key=lambda item: item[1][:2])
        return {name: entry[3] for name, entry in ordered}

    def dump(self, state: dict[str, list[Any]]) -> Any:
        # A list, not an object: a field named "$date" must not look like Extended JSON.
        return [[name, *to_ejson(entry)] for name, entry in state.items()]

    def load(self, data: Any) -> dict[str, list[Any]]:
        return {row[0]: from_ejson(row[1:]) for row in data}


CLASSES: tuple[type[Accumulator], ...] = (Push, AddToSet, MergeObjects)
