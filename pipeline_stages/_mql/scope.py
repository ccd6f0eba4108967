"""The evaluation context of an MQL expression compiled to Spark, and its result type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import Column
from pyspark.sql import functions as F


@dataclass(frozen=True)
class Expr:
    """A compiled MQL expression: a VARIANT value and a per-document error.

    `value` follows the encoding in `values.py` (SQL NULL = missing). `error` is a STRING
    column holding MongoDB's error message for documents where evaluation failed (and NULL
    where it succeeded), or `None` when the expression can never fail. Where `error` is
    non-NULL, `value` is meaningless.
    """

    value: Column
    error: Column | None = None

    def error_or_null(self) -> Column:
        """The error column, or a NULL string column when the expression cannot fail."""
        return self.error if self.error is not None else F.lit(None).cast("string")


@dataclass(frozen=True)
class Predicate:
    """A compiled query filter: a non-NULL BOOLEAN condition and a per-document error."""

    condition: Column
    error: Column | None = None


@dataclass(frozen=True)
class Scope:
    """What an expression can see: the document, stream metadata and variables.

    `current` is what field paths (`"$a.b"`) read; `root` is `$$ROOT`. `meta` is the stream
    metadata object read by `{$meta: "stream..."}`. `variables` maps variable names without
    the `$$` (`"this"`, `"value"`, `let` names) to VARIANT columns, which may be Spark
    lambda variables inside higher-order functions.
    """

    root: Column
    current: Column
    meta: Column
    variables: Mapping[str, Column] = field(default_factory=dict)

    @classmethod
    def for_document(cls, doc: Column, meta: Column) -> Scope:
        """The scope of a stage evaluating against document `doc`."""
        return cls(root=doc, current=doc, meta=meta)

    def with_variables(self, **variables: Column) -> Scope:
        """A child scope with extra variables bound (shadowing outer ones)."""
        return replace(self, variables={**self.variables, **variables})
