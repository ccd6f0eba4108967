"""``$merge`` preparation shared by both stores: ``on`` fields, keys, ordering into rounds.

MongoDB's ``$merge`` applies pipeline documents one after another, so a later document with
the same ``on`` key sees the effect of an earlier one. The Mongo store sends unordered bulk
writes, whose operations may run in any order, so documents are split into *rounds*: round
*n* holds the *n*-th document of every key. Keys are distinct within a round, and rounds run
in sequence, which restores the per-key order without giving up ``ordered=False``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bson import ObjectId

from .codec import canonical_key, normalize_document
from .errors import InvalidDocument, InvalidQuery

MISSING: Any = object()

#: MongoDB's message for a document whose ``on`` field is unusable (error 51132).
ON_FIELD_MESSAGE = (
    "$merge write error: 'on' field '{field}' cannot be missing, null, undefined or an array"
)


@dataclass(frozen=True)
class MergeItem:
    """One input document ready to be written.

    Attributes:
        index: Position in the caller's batch (errors are reported in this order).
        original: The caller's document, returned with errors.
        doc: Normalised copy; on ``_id`` merges it has an ``_id`` (generated if absent).
        key: Canonical form of the ``on`` values (equal keys match the same target).
        filter: Equality filter on the ``on`` fields.
    """

    index: int
    original: dict[str, Any]
    doc: dict[str, Any]
    key: str
    filter: dict[str, Any]


def on_fields(on: str | Sequence[str] | None) -> tuple[str, ...]:
    """The ``on`` fields as a tuple; ``["_id"]`` when not given.

    Raises:
        InvalidQuery: On an empty list, an empty field name or a repeated field.
    """
    if on is None:
        return ("_id",)
    fields = (on,) if isinstance(on, str) else tuple(on)
    if not fields or any(not isinstance(f, str) or not f for f in fields):
        raise InvalidQuery("'on' must be a non-empty list of field names", path="/on")
    if len(set(fields)) != len(fields):
        raise InvalidQuery("'on' must not repeat a field", path="/on")
    return fields


def get_path(doc: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted path through sub-documents, or :data:`MISSING`."""
    value: Any = doc
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def plan(
    docs: Sequence[Mapping[str, Any]], on: tuple[str, ...]
) -> tuple[list[MergeItem], list[tuple[int, dict[str, Any], str]]]:
    """Validates documents and computes their keys.

    Returns:
        The writable items, and ``(index, document, message)`` for documents rejected before
        any write (naive datetime, unusable ``on`` field, array ``_id``).
    """
    items: list[MergeItem] = []
    errors: list[tuple[int, dict[str, Any], str]] = []
    for index, original in enumerate(docs):
        try:
            items.append(_item(index, dict(original), on))
        except InvalidDocument as exc:
            errors.append((index, dict(original), exc.message))
    return items, errors


def rounds(items: Sequence[MergeItem]) -> list[list[MergeItem]]:
    """Splits items so that round *n* holds the *n*-th item of every key (see module doc)."""
    seen: dict[str, int] = {}
    out: list[list[MergeItem]] = []
    for item in items:
        n = seen.get(item.key, 0)
        seen[item.key] = n + 1
        if n == len(out):
            out.append([])
        out[n].append(item)
    return out


def _item(index: int, original: dict[str, Any], on: tuple[str, ...]) -> MergeItem:
    doc = normalize_document(original)
    if on == ("_id",) and "_id" not in doc:
        doc = {"_id": ObjectId(), **doc}
    if isinstance(doc.get("_id"), list):
        raise InvalidDocument("The '_id' value cannot be of type array", path="/_id")
    values = [get_path(doc, f) for f in on]
    for f, value in zip(on, values, strict=True):
        if value is MISSING or value is None or isinstance(value, list):
            raise InvalidDocument(ON_FIELD_MESSAGE.format(field=f), path=f"/{f}")
    return MergeItem(
        index=index,
        original=original,
        doc=doc,
        key=canonical_key(values),
        filter=dict(zip(on, values, strict=True)),
    )


_WHEN_MATCHED = ("replace", "keepExisting", "merge", "delete")
_WHEN_NOT_MATCHED = ("insert", "discard")


def check_modes(when_matched: str, when_not_matched: str) -> None:
    """Rejects modes other than Atlas's string forms (pipelines and expressions are not stored here).

    Raises:
        InvalidQuery: On an unknown mode.
    """
    if when_matched not in _WHEN_MATCHED:
        msg = f"whenMatched must be one of {', '.join(_WHEN_MATCHED)}, got {when_matched!r}"
        raise InvalidQuery(msg, path="/whenMatched")
    if when_not_matched not in _WHEN_NOT_MATCHED:
        msg = f"whenNotMatched must be one of {', '.join(_WHEN_NOT_MATCHED)}, got {when_not_matched!r}"
        raise InvalidQuery(msg, path="/whenNotMatched")


def index_name(fields: Sequence[str]) -> str:
    """MongoDB's default name for an ascending index on ``fields`` (``a_1_b_1``)."""
    return "_".join(f"{f}_1" for f in fields)


def inserted_document(item: MergeItem, *, replace: bool) -> dict[str, Any]:
    """The document an upsert inserts, in MongoDB's field order.

    ``_id`` always comes first. An update-style upsert (``merge``, ``keepExisting``) starts
    from the filter's top-level equality fields and then applies the document; a replacement
    upsert is the document itself.
    """
    doc = item.doc
    head: dict[str, Any] = {"_id": doc["_id"] if "_id" in doc else ObjectId()}
    if not replace:
        head.update((f, v) for f, v in item.filter.items() if "." not in f)
    return {**head, **doc}


def sort_errors(
    errors: Sequence[tuple[int, dict[str, Any], str]],
) -> tuple[tuple[dict[str, Any], str], ...]:
    """``(document, message)`` pairs in input order."""
    return tuple((doc, message) for _, doc, message in sorted(errors, key=lambda e: e[0]))
