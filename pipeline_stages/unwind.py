"""`$unwind`: one output document per element of an array field.

Both MongoDB forms are supported: `"$path"` and
`{path, includeArrayIndex, preserveNullAndEmptyArrays}`. `path` must be a `$`-prefixed field
path (not a `$$` variable); `includeArrayIndex` is a field name that must not start with `$`;
`preserveNullAndEmptyArrays` is a boolean (default false). Unknown fields are rejected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field, StrictBool, field_validator

from pipeline_stages._base import BodySpec, ProblemCode, custom_error, describe, field_name_problem

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


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


def compile(spec: UnwindSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001, ARG001
    """One document per array element (MongoDB's `$unwind` rules; cannot fail).

    Non-array values pass as one document; null, missing and empty arrays are dropped unless
    `preserveNullAndEmptyArrays` (then the document passes, without the field for an empty
    array). `sub` numbers the outputs of one input so their ids stay distinct and ordered.
    """
    from pyspark.sql import functions as F

    from pipeline_stages._mql import kinds as K
    from pipeline_stages._mql import values as V
    from pipeline_stages._mql.ops.paths import get_path, remove_field, set_field
    from pipeline_stages._mql.scope import Expr
    from pipeline_stages._stream.frame import DOC, KIND, KIND_TICK, SUB, StreamFrame

    dotted = spec.path[1:]
    preserve = spec.preserve_null_and_empty_arrays
    value = get_path(F.col(DOC), dotted.split("."))
    kind = K.kind_of(value)
    array = F.try_variant_get(value, "$", "array<variant>")
    one = F.array(F.lit(None).cast("variant"))
    none = F.array().cast("array<variant>")
    drop_or_keep = one if (preserve or ctx.window_ahead) else none
    elements = (
        F.when(~frame.healthy, one)
        .when((kind == "array") & (F.size(array) > 0), array)
        .when((kind == "array") | K.is_nullish(value), drop_or_keep)
        .otherwise(one)
    )
    df = frame.df.withColumn("__unwind_kind", kind).select(
        "*", F.posexplode(elements).alias("__unwind_pos", "__unwind_el")
    )
    healthy = StreamFrame(df).healthy
    is_element = healthy & (F.col("__unwind_kind") == "array") & F.col("__unwind_el").isNotNull()
    emptied = healthy & (F.col("__unwind_kind") == "array") & F.col("__unwind_el").isNull()
    nullish = healthy & F.col("__unwind_kind").isin("missing", "null")
    new_doc = set_field(F.col(DOC), dotted, Expr(value=F.col("__unwind_el"))).value
    index = F.when(is_element, V.from_long(F.col("__unwind_pos"))).otherwise(V.null())
    if spec.include_array_index:
        new_doc = set_field(new_doc, spec.include_array_index, Expr(value=index)).value
    kept = (
        set_field(F.col(DOC), spec.include_array_index, Expr(value=index)).value
        if spec.include_array_index
        else F.col(DOC)
    )
    dropped = (emptied | nullish) if not preserve else F.lit(False)
    df = df.withColumns(
        {
            DOC: F.when(is_element, new_doc)
            .when(dropped, F.lit(None).cast("variant"))
            .when(emptied, remove_field(kept, dotted))
            .when(healthy, kept)
            .otherwise(F.col(DOC)),
            KIND: F.when(dropped, F.lit(KIND_TICK)).otherwise(F.col(KIND)),
            SUB: F.col(SUB) * 1_000_003 + F.col("__unwind_pos"),
        }
    )
    return StreamFrame(df.drop("__unwind_kind", "__unwind_pos", "__unwind_el"))
