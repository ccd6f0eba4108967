"""`$count`: one document `{<field>: <number of documents>}` per window (window only).

The body is the output field name: a non-empty string that does not start with `$` and does
not contain `.`, as in MongoDB.
"""

from __future__ import annotations

from typing import Any

from pipeline_stages._base import BodySpec, ProblemCode, custom_error, describe

KEY = "$count"
#: MongoDB implements `$count` as a `$group` followed by a `$project`.
OPERATOR_NAME = "GroupOperator"


class CountSpec(BodySpec):
    """The body of `$count`."""

    field: str

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, str) or not raw:
            raise custom_error(
                "string_type", f"the count field must be a non-empty string, got {describe(raw)}"
            )
        if raw.startswith("$"):
            raise custom_error(
                ProblemCode.INVALID_VALUE,
                f"the count field cannot be a $-prefixed path, got {describe(raw)}",
            )
        if "." in raw:
            raise custom_error(
                ProblemCode.INVALID_VALUE,
                f"the count field cannot contain '.', got {describe(raw)}",
            )
        return {"field": raw}
