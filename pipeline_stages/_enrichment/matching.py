"""MQL's equality join in plain Python: which foreign documents a local value matches.

`$lookup` by `localField`/`foreignField` matches a foreign document when its `foreignField`
equals the local value, with MongoDB's rules:

* an array on the local side matches any of its elements (and, like `$in`, an element that
  is itself an array matches that array);
* an array on the foreign side matches when any element (or the whole array) equals;
* a missing field equals null, on either side;
* numbers compare by value across int, long, double and decimal (`1`, `1.0`, `{$numberLong:
  "1"}`), as `values.sort_key` does.

The store answers one `$in` query for all the keys of a batch (it may return more than the
exact matches: the rows are re-matched here, so a store's looser prefilter is harmless).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeline_stages._documents.values import MISSING, get_path, sort_key

Key = tuple[Any, ...]


def local_keys(value: Any) -> list[Any]:
    """The values a local value is matched by: an array's elements (and itself), else itself."""
    if value is MISSING:
        return [None]
    if isinstance(value, list):
        return [*value, value] if value else [value]
    return [value]


def foreign_keys(doc: Mapping[str, Any], field: str) -> set[Key]:
    """The equality keys under which a foreign document is found by `field`."""
    value = get_path(doc, field)
    if value is MISSING:
        return {sort_key(None)}
    keys = {sort_key(value)}
    if isinstance(value, list):
        keys.update(sort_key(element) for element in value)
        if "." in field and not value:
            # A dotted path through an array of objects that lack the field is missing too.
            keys.add(sort_key(None))
    return keys


def distinct_values(values: Iterable[Any]) -> list[Any]:
    """The values without MQL-equal duplicates, first occurrence kept (for one `$in`)."""
    seen: set[Key] = set()
    out = []
    for value in values:
        key = sort_key(value)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


class ForeignIndex:
    """Foreign documents indexed by their equality keys, in the order the store gave them."""

    def __init__(self, docs: Sequence[Mapping[str, Any]], field: str) -> None:
        self._docs = docs
        self._by_key: dict[Key, list[int]] = {}
        for position, doc in enumerate(docs):
            for key in foreign_keys(doc, field):
                self._by_key.setdefault(key, []).append(position)

    def matches(self, values: Sequence[Any]) -> list[Mapping[str, Any]]:
        """The documents matching any of `values` (from `local_keys`), each once, in order."""
        if len(values) == 1:
            return [self._docs[i] for i in self._by_key.get(sort_key(values[0]), ())]
        positions: set[int] = set()
        for value in values:
            positions.update(self._by_key.get(sort_key(value), ()))
        return [self._docs[i] for i in sorted(positions)]
