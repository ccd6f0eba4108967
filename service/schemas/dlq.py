"""Bodies of `POST /processors/{name}/dlq:replay` (the DLQ list and purge take query parameters)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    WithJsonSchema,
    model_validator,
)

from service.schemas.processors import NAME_PATTERN, Name

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def date_time_text(value: Any) -> Any:
    """Only ISO-8601 text: pydantic would read `0.5` or `1700000000` as Unix seconds."""
    if not isinstance(value, str) or _NUMBER.fullmatch(value.strip()):
        raise ValueError(
            f"must be an ISO-8601 date-time such as 2024-01-01T00:00:00Z, got {value!r}"
        )
    return value


DateTimeText = Annotated[datetime, BeforeValidator(date_time_text)]


#: A name as the document describes it (never null: a key is given with a name, or left out).
_NAME_SCHEMA = {"type": "string", "pattern": NAME_PATTERN}


class ReplayTarget(BaseModel):
    """Where replayed records go: exactly one of `processor` and `connectionName`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "oneOf": [{"required": ["processor"]}, {"required": ["connectionName"]}]
        },
    )

    processor: Annotated[Name | None, WithJsonSchema(_NAME_SCHEMA)] = Field(
        default=None, description="A processor whose $source is an HttpIngest connection."
    )
    connectionName: Annotated[Name | None, WithJsonSchema(_NAME_SCHEMA)] = Field(
        default=None, description="An HttpIngest connection."
    )

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, value: Any) -> Any:
        if isinstance(value, dict):
            given = [key for key in ("processor", "connectionName") if key in value]
            if len(given) != 1 or value[given[0]] is None:
                raise ValueError("target takes exactly one of processor and connectionName")
        return value

    @property
    def key(self) -> str:
        """How `replayedTo` names the target: `processor:<name>` or `connection:<name>`."""
        if self.processor is not None:
            return f"processor:{self.processor}"
        return f"connection:{self.connectionName}"


class DlqReplay(BaseModel):
    """`POST /processors/{name}/dlq:replay`: the DLQ list's filters, a target, `dryRun`."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"reason": "late", "target": {"processor": "corrections"}, "dryRun": True}]
        },
    )

    reason: Annotated[str | None, Field(max_length=4096)] = Field(
        default=None, description="errInfo.reason contains this text (ignoring case)."
    )
    operatorName: Annotated[str | None, Field(max_length=200)] = None
    from_: DateTimeText | None = Field(default=None, alias="from", description="dlqTime >= from")
    to: DateTimeText | None = Field(
        default=None, description="dlqTime < to (default: the time of the request)"
    )
    filter: dict[str, Any] | None = Field(default=None, description="An MQL filter (object).")
    target: ReplayTarget
    dryRun: StrictBool = Field(default=False, description="Count only; write nothing.")


class DlqReplayed(BaseModel):
    """What a replay did (or, with `dryRun`, would do)."""

    replayed: int = Field(description="Records written to the target (now marked replayedTo).")
    skipped: int = Field(description="Matching records already replayed to this target.")
    notReplayable: int = Field(
        description="Matching records whose original document is not a JSON object (e.g. "
        "input that was not JSON); they stay in the DLQ unmarked."
    )
