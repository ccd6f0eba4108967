"""Outputs grouped by their target collection, shared by the `$merge` and collection writers.

Both resolve each output's `db`/`coll` (constants or per-document values computed in Spark),
refuse Sluice's reserved database on `local`, and give documents without `_id` the
deterministic id of their key when asked; documents that cannot be placed become failures.
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
    resolve_name,
)
from pipeline_stages._documents.ejson import from_relaxed_ejson
from pipeline_stages._stream.batch import Output

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
        if embedded and target_db == RESERVED_LOCAL_DB:
            failures.append((index, f"database {target_db!r} of 'local' is reserved for Sluice"))
            continue
        doc = json.loads(output.doc_json)
        if assign_ids and isinstance(doc, dict):
            doc = with_id(doc, keys[index])
        groups.setdefault((target_db, target_coll), []).append((index, from_relaxed_ejson(doc)))
    for (target_db, target_coll), pending in groups.items():
        failures.extend(write(target_db, target_coll, pending))
    return failures


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
