"""`$replaceRoot`: replace each document by the result of the `newRoot` expression.

Supported Atlas field: `newRoot` (required; an MQL expression kept as raw JSON). A `newRoot`
that does not evaluate to an object is a per-document error (DLQ), as in Atlas, so it is not
checked here.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from pipeline_stages._base import StageModel

KEY = "$replaceRoot"
OPERATOR_NAME = "ReplaceRootOperator"


class ReplaceRootSpec(StageModel):
    """The body of `$replaceRoot`."""

    new_root: Any = Field(alias="newRoot")
