"""MQL filters and sorts evaluated in Python, for the SQLite stores.

SQLite cannot run MQL, and a home-grown matcher would drift from MongoDB, so filters are
evaluated by mongomock's matcher (``mongomock.filtering.filter_applies``) and sorts use its
BSON-order sort keys. This makes mongomock a runtime dependency of the SQLite stores. Known
differences from a server: Python ``re`` instead of PCRE for ``$regex``; no collation.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from mongomock import OperationFailure
from mongomock.filtering import filter_applies, resolve_sort_key

from .codec import normalize_filter
from .errors import InvalidQuery

# mongomock is untyped; these typed aliases keep the untyped calls in one place.
_filter_applies: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] = filter_applies
_sort_key: Callable[[str, Mapping[str, Any]], Any] = resolve_sort_key


def matcher(query: Mapping[str, Any] | None) -> Callable[[dict[str, Any]], bool]:
    """A predicate applying ``query`` (validated with :func:`normalize_filter`) to documents.

    The predicate raises InvalidQuery when the matcher rejects the filter (unknown or
    unsupported operator, malformed value).
    """
    checked = normalize_filter(query)
    if not checked:
        return lambda _doc: True

    def matches(doc: dict[str, Any]) -> bool:
        try:
            return bool(_filter_applies(checked, doc))
        except (OperationFailure, NotImplementedError, TypeError, ValueError, re.error) as exc:
            raise InvalidQuery(f"invalid filter: {exc}", path="/filter") from None

    return matches


def check_sort(sort: Sequence[tuple[str, int]] | None) -> list[tuple[str, int]]:
    """Validates a sort specification: ``[(field, 1 | -1), ...]``.

    Raises:
        InvalidQuery: On anything else.
    """
    if sort is None:
        return []
    out: list[tuple[str, int]] = []
    for i, entry in enumerate(sort):
        if (
            not isinstance(entry, tuple | list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or entry[1] not in (1, -1)
            or isinstance(entry[1], bool)
        ):
            raise InvalidQuery("sort entries are (field, 1 | -1)", path=f"/sort/{i}")
        out.append((entry[0], int(entry[1])))
    return out


def sort_documents(
    docs: Iterable[dict[str, Any]], sort: Sequence[tuple[str, int]]
) -> list[dict[str, Any]]:
    """Sorts documents in BSON order by several keys (stable, like mongomock and MongoDB)."""
    out = list(docs)
    for field, direction in reversed(sort):
        out.sort(key=functools.partial(_sort_key, field), reverse=direction < 0)
    return out
