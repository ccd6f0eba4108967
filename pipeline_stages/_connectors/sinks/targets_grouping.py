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
from pipeline_stages._engine.sink import Output

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
    from service.stores import from_relaxed_ejson

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
