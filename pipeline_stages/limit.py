"""`$limit`: keep the first n documents of a window (window inner pipeline only).

The body is a positive whole number (`5.0` is accepted, as mongosh sends doubles). In a
window, `$limit` may not come before the first `$group`/`$sort` (checked by
`parse_pipeline`).
"""

from __future__ import annotations

from typing import Any

from pipeline_stages._base import BodySpec, custom_error, describe

KEY = "$limit"
OPERATOR_NAME = "LimitOperator"


class LimitSpec(BodySpec):
    """The body of `$limit`."""

    limit: int

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        number = isinstance(raw, int | float) and not isinstance(raw, bool)
        if not number or (isinstance(raw, float) and not raw.is_integer()):
            raise custom_error("int_type", f"$limit takes a positive integer, got {describe(raw)}")
        if raw <= 0:
            raise custom_error(
                "greater_than", f"$limit takes a positive integer, got {describe(raw)}"
            )
        return {"limit": int(raw)}
