"""`$merge`: write each document to an Atlas collection (a sink; last stage, main pipeline).

Supported Atlas fields:

* `into` (required): `{connectionName, db, coll}`; `db` and `coll` are strings or
  expressions evaluated per document (a failing one sends the document to the DLQ);
* `on`: a field or an array of fields (default `_id`);
* `whenMatched`: `replace`, `keepExisting`, `merge` (the default), `delete` (an Atlas
  extension), an update pipeline (array of stages, raw JSON) or an expression (Atlas);
* `whenNotMatched`: `insert` (the default), `discard` or an expression (Atlas);
* `let`: variables for a pipeline `whenMatched` (refused with the fixed string modes);
* `parallelism` (≥ 1, default 1).

Rejected: `fail` for either option (`unsupported_option`: Atlas does not support it, because
a stream cannot abort one write without failing the processor).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from pipeline_stages._base import (
    OneOrMoreStrings,
    ProblemCode,
    StageModel,
    WholeNumber,
    custom_error,
    describe,
)
from pipeline_stages._problems import CheckedSpec, ErrorList, given

if TYPE_CHECKING:
    from pipeline_stages._connectors.sinks.plans import MergePlan
    from pipeline_stages._stream.context import CompileContext


KEY = "$merge"
OPERATOR_NAME = "MergeOperator"

WHEN_MATCHED = ("replace", "keepExisting", "merge", "delete")
WHEN_NOT_MATCHED = ("insert", "discard")


def name_or_expression(value: Any) -> Any:
    """A target name: a non-empty string (possibly a `$field` path) or an expression object."""
    if (isinstance(value, str) and value) or (isinstance(value, dict) and value):
        return value
    raise custom_error(
        ProblemCode.INVALID_VALUE,
        f"Input should be a non-empty string or an expression object, got {describe(value)}",
    )


def _mode(value: Any, *, allowed: tuple[str, ...], option: str, pipeline_ok: bool) -> Any:
    if value == "fail":
        raise custom_error(
            ProblemCode.UNSUPPORTED_OPTION,
            f'{option}: "fail" is not supported in a stream processor; use one of {", ".join(allowed)}',
        )
    if isinstance(value, str):
        if value in allowed:
            return value
        raise custom_error(
            "literal_error", f"{option} must be one of {', '.join(allowed)}, got {describe(value)}"
        )
    if isinstance(value, dict) and value:
        return value
    if pipeline_ok and isinstance(value, list):
        errors = ErrorList()
        for index, stage in enumerate(value):
            if not isinstance(stage, dict) or len(stage) != 1:
                errors.add(
                    (index,),
                    ProblemCode.STAGE_SHAPE,
                    f"A stage must be an object with exactly one key, got {describe(stage)}",
                    stage,
                )
        errors.raise_if_any(option)
        return value
    shapes = (
        "a mode string, a pipeline or an expression"
        if pipeline_ok
        else "a mode string or an expression"
    )
    raise custom_error(
        ProblemCode.INVALID_VALUE, f"{option} must be {shapes}, got {describe(value)}"
    )


class MergeInto(StageModel):
    """`$merge.into`: the target collection behind a registry connection."""

    connection_name: str = Field(alias="connectionName")
    db: Any
    coll: Any

    _names = field_validator("db", "coll")(name_or_expression)


class MergeSpec(CheckedSpec):
    """The body of `$merge`."""

    into: MergeInto
    on: OneOrMoreStrings | None = None
    let: dict[str, Any] | None = None
    when_matched: Any = Field(default="merge", alias="whenMatched")
    when_not_matched: Any = Field(default="insert", alias="whenNotMatched")
    parallelism: WholeNumber = Field(default=1, ge=1)

    @field_validator("when_matched")
    @classmethod
    def _when_matched(cls, value: Any) -> Any:
        return _mode(value, allowed=WHEN_MATCHED, option="whenMatched", pipeline_ok=True)

    @field_validator("when_not_matched")
    @classmethod
    def _when_not_matched(cls, value: Any) -> Any:
        return _mode(value, allowed=WHEN_NOT_MATCHED, option="whenNotMatched", pipeline_ok=False)

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        when_matched = raw.get("whenMatched", "merge")
        if given(raw, "let") and isinstance(when_matched, str):
            errors.add(
                ("let",),
                ProblemCode.INVALID_COMBINATION,
                f'let variables can only be used with a pipeline whenMatched, not "{when_matched}"',
                raw["let"],
            )

    @property
    def when_matched_pipeline(self) -> list[dict[str, Any]] | None:
        """The update pipeline when `whenMatched` is one, else None."""
        return self.when_matched if isinstance(self.when_matched, list) else None


def compile(spec: MergeSpec, ctx: CompileContext, path: str) -> MergePlan | None:  # noqa: A001
    """The `$merge` sink plan (`sinks.plans.MergePlan`); the runner builds its writer.

    Targets: the built-in `local` connection (the embedded store) and `Cluster` connections.
    Update pipelines and expressions in `whenMatched` / `whenNotMatched` are refused with
    `unsupported_option` (the stores apply the string modes only).
    """
    from pipeline_stages._connectors.sinks.planning import plan_merge

    return plan_merge(spec, connection_of=ctx.connection, path=path, problems=ctx.problems)
