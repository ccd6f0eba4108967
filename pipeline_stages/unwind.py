"""`$unwind`: one output document per element of an array field.

Both MongoDB forms are supported: `"$path"` and
`{path, includeArrayIndex, preserveNullAndEmptyArrays}`. `path` must be a `$`-prefixed field
path (not a `$$` variable); `includeArrayIndex` is a field name that must not start with `$`;
`preserveNullAndEmptyArrays` is a boolean (default false). Unknown fields are rejected.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, StrictBool, field_validator

from pipeline_stages._base import BodySpec, ProblemCode, custom_error, describe, field_name_problem

KEY = "$unwind"
OPERATOR_NAME = "UnwindOperator"


def _path_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"path must be a string, got {describe(value)}"
    if not value.startswith("$") or value.startswith("$$") or len(value) < 2:
        return f"path option to $unwind stage should be prefixed with a '$', got {describe(value)}"
    return field_name_problem(value[1:], dotted=True)


class UnwindSpec(BodySpec):
    """The body of `$unwind` (the string form is normalised to `{path}`)."""

    path: str
    include_array_index: str | None = Field(default=None, alias="includeArrayIndex")
    preserve_null_and_empty_arrays: StrictBool = Field(
        default=False, alias="preserveNullAndEmptyArrays"
    )

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        if isinstance(raw, dict):
            return raw
        if isinstance(raw, str):
            if problem := _path_problem(raw):
                raise custom_error(ProblemCode.INVALID_VALUE, problem)
            return {"path": raw}
        raise custom_error(
            "dict_type",
            f"$unwind takes a '$field' path or an object with a path, got {describe(raw)}",
        )

    @field_validator("path", mode="before")
    @classmethod
    def _dollar_path(cls, value: Any) -> Any:
        if isinstance(value, str) and (problem := _path_problem(value)):
            raise custom_error(ProblemCode.INVALID_VALUE, problem)
        return value

    @field_validator("include_array_index")
    @classmethod
    def _index_field(cls, value: str | None) -> str | None:
        if value is not None and (problem := field_name_problem(value, dotted=True)):
            raise custom_error(ProblemCode.INVALID_VALUE, f"includeArrayIndex: {problem}")
        return value

    @property
    def field_path(self) -> str:
        """The unwound field path without its `$` (`"$a.b"` → `"a.b"`)."""
        return self.path[1:]
