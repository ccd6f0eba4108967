"""`$sort`: order the documents of a window (window inner pipeline only).

The body maps field paths to `1` (ascending) or `-1` (descending), in precedence order; the
order is kept exactly as written. `1.0`/`-1.0` (what mongosh sends) are accepted. `{$meta:
"textScore"}` and other sort values are refused: there is no text search on a stream.
At most 32 keys, as in MongoDB.
"""

from __future__ import annotations

from typing import Any, Literal

from pipeline_stages._base import BodySpec, ProblemCode, describe, field_name_problem
from pipeline_stages._problems import ErrorList, Loc

KEY = "$sort"
OPERATOR_NAME = "SortOperator"

MAX_SORT_KEYS = 32

Direction = Literal[1, -1]


def sort_keys_errors(raw: Any, errors: ErrorList, loc: Loc = (), *, what: str) -> dict[str, int]:
    """Validate a `{path: 1 | -1}` object, recording errors under `loc`; returns the keys."""
    if not isinstance(raw, dict):
        errors.add(
            loc, "dict_type", f"{what} must be an object of field: 1 | -1, got {describe(raw)}", raw
        )
        return {}
    if not raw:
        errors.add(loc, "too_short", f"{what} must have at least one sort key, got {{}}", raw)
    if len(raw) > MAX_SORT_KEYS:
        errors.add(
            loc, "too_long", f"{what} may have at most {MAX_SORT_KEYS} keys, got {len(raw)}", raw
        )
    keys: dict[str, int] = {}
    for name, value in raw.items():
        if problem := field_name_problem(name, dotted=True):
            errors.add((*loc, name), ProblemCode.INVALID_VALUE, problem, name)
        elif isinstance(value, int | float) and not isinstance(value, bool) and value in (1, -1):
            keys[name] = int(value)
        else:
            errors.add(
                (*loc, name),
                ProblemCode.INVALID_VALUE,
                f"$sort key ordering must be 1 (for ascending) or -1 (for descending), got {describe(value)}",
                value,
            )
    return keys


class SortSpec(BodySpec):
    """The body of `$sort`: field path → 1 | -1, in precedence order."""

    keys: dict[str, Direction]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        keys = sort_keys_errors(raw, errors, what="$sort")
        errors.raise_if_any(cls.__name__)
        return {"keys": keys}
