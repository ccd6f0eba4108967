"""`$redact`: prune document levels with an expression yielding `$$DESCEND`, `$$PRUNE` or `$$KEEP`.

The body is any MQL expression, kept as raw JSON. A result other than the three system
variables is a per-document error (DLQ), as in MongoDB, so it is not checked here.
"""

from __future__ import annotations

from typing import Any

from pipeline_stages._base import BodySpec

KEY = "$redact"
OPERATOR_NAME = "RedactOperator"


class RedactSpec(BodySpec):
    """The body of `$redact`: the raw expression."""

    expression: Any

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        return {"expression": raw}
