"""Outputs grouped by their target collection, shared by the `$merge` and collection writers.

Both resolve each output's `db`/`coll` (constants or per-document values computed in Spark),
check the namespace (`plans.namespace_problem`, the rule literal names get at compile time),
refuse Sluice's reserved database on `local`, and give documents without `_id` the
deterministic id of their key when asked. A document that cannot be placed or stored becomes
a failure (its DLQ record says why): a bad name, nesting deeper than a BSON document may
(`BSON_MAX_DEPTH`), an invalid Extended JSON wrapper or a date outside the years 1 to 9999
(`from_relaxed_ejson(..., strict=True)`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pipeline_stages._connectors.sinks.ids import with_id
from pipeline_stages._connectors.sinks.plans import (
    RESERVED_LOCAL_DB,
    Name,
    TargetError,
    namespace_problem,
    resolve_name,
)
from pipeline_stages._connectors.sinks.stored_text import DIGITS_TO_ZERO, LONG_DIGITS, is_utf8
from pipeline_stages._documents.ejson import from_relaxed_ejson
from pipeline_stages._stream.batch import Output
from pipeline_stages._stream.json_text import (
    BSON_MAX_DEPTH,
    SURROGATE_ESCAPE,
    json_depth,
    nests_deeper_than,
)

#: `(output index, document)` pairs bound for one collection, in output order.
Pending = list[tuple[int, dict[str, Any]]]
#: Writes one collection's pending documents (db, coll, pending); returns `(index, message)`
#: failures for the documents not written.
WriteGroup = Callable[[str, str, Pending], list[tuple[int, str]]]


def write_by_collection(
    outputs: Sequence[Output],
    keys: Sequence[str],
    *,
    db: Name,
    coll: Name,
    embedded: bool,
    assign_ids: bool,
    write: WriteGroup,
) -> list[tuple[int, str]]:
    """Group the outputs by target collection, `write` each group, and return the `(index,
    message)` failures: outputs that could not be placed and documents not written."""
    failures: list[tuple[int, str]] = []
    groups: dict[tuple[str, str], Pending] = {}
    for index, output in enumerate(outputs):
        try:
            target_db = resolve_name(db, "db", output.target)
            target_coll = resolve_name(coll, "coll", output.target)
        except TargetError as error:
            failures.append((index, str(error)))
            continue
        problem = namespace_problem(target_db, target_coll)
        if problem is not None:
            failures.append((index, problem))
            continue
        if embedded and target_db == RESERVED_LOCAL_DB:
            failures.append((index, f"database {target_db!r} of 'local' is reserved for Sluice"))
            continue
        try:
            doc = stored_document(output.doc_json, id_key=keys[index] if assign_ids else None)
        except ValueError as error:
            failures.append((index, str(error)))
            continue
        groups.setdefault((target_db, target_coll), []).append((index, doc))
    for (target_db, target_coll), pending in groups.items():
        failures.extend(write(target_db, target_coll, pending))
    return failures


def stored_document(doc_json: str, *, id_key: str | None = None) -> Any:
    """An output's document in the stores' in-memory form (with the ObjectId of `id_key` as
    its `_id` when it has none and a key is given: `ids.with_id`).

    Raises:
        ValueError: The document nests deeper than `BSON_MAX_DEPTH` levels, holds an integer
            beyond 64 bits, a lone surrogate, an invalid Extended JSON wrapper or a date
            outside the years 1 to 9999.
    """
    if nests_deeper_than(doc_json, BSON_MAX_DEPTH):
        raise ValueError(
            f"the document nests {json_depth(doc_json)} levels; a collection holds documents "
            f"of at most {BSON_MAX_DEPTH} (MongoDB's limit)"
        )
    doc = json.loads(doc_json)
    if SURROGATE_ESCAPE.search(doc_json) or not is_utf8(doc_json):
        where = _lone_surrogate(doc)
        if where is not None:
            raise ValueError(
                f"the string at {where} holds a lone surrogate, which is not Unicode text "
                "(a collection holds UTF-8 only)"
            )
    if LONG_DIGITS in doc_json.translate(DIGITS_TO_ZERO):
        where = _huge_integer(doc)
        if where is not None:
            raise ValueError(
                f"the integer at {where} does not fit in 64 bits, the largest integer a "
                "collection holds"
            )
    if id_key is not None and isinstance(doc, dict):
        doc = with_id(doc, id_key)
    return from_relaxed_ejson(doc, strict=True)


def _huge_integer(value: Any) -> str | None:
    """The JSON pointer of the first integer outside the 64-bit range, or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            if not -(2**63) <= item < 2**63:
                return path or "/"
        elif isinstance(item, dict):
            stack.extend((f"{path}/{key}", child) for key, child in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}/{i}", child) for i, child in enumerate(item))
    return None


def _lone_surrogate(value: Any) -> str | None:
    """The JSON pointer of the first key or string holding a lone surrogate, or None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if not is_utf8(item):
                return path or "/"
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}/{key}"
                if not is_utf8(key):
                    return child_path.encode("utf-8", "backslashreplace").decode()
                stack.append((child_path, child))
        elif isinstance(item, list):
            stack.extend((f"{path}/{i}", child) for i, child in enumerate(item))
    return None


def match_errors(
    pending: Pending, errors: tuple[tuple[dict[str, Any], str], ...]
) -> list[tuple[int, str]]:
    """Map the store's `(document, message)` errors (in input order) back to batch indexes.

    The store returns copies of the documents, so they are matched by value, scanning forward:
    errors come in input order, so the first equal document not yet passed is the one.
    """
    found: list[tuple[int, str]] = []
    position = 0
    for doc, message in errors:
        while position < len(pending) and pending[position][1] != doc:
            position += 1
        if position == len(pending):
            break  # not found: cannot happen with the stores' contract; never guess
        found.append((pending[position][0], message))
        position += 1
    return found
