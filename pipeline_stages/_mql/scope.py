"""The evaluation context of an MQL expression compiled to Spark, and its result type.

**Bindings (shared subexpressions).** A compiled expression refers to its operands' values and
type tags many times. Inlining them would duplicate the operand's whole subtree at every use
(Spark does not reliably de-duplicate inside `CASE` branches), which is how a single `$gt`
once grew past Spark's generated-code limits. So `Scope.bind(col)` records `col` under a fresh
column name and returns a reference to it; the stage materialises the recorded columns with
`apply_bindings(df, bindings)` (one `withColumns` per dependency level) before selecting its
outputs, then drops them with `drop_bindings`. Spark's CollapseProject does not re-inline an
expensive expression that is referenced more than once, so each binding is computed once.

Inside higher-order-function lambdas (`$map`, `$filter`, `$reduce`) there is no row to attach
a column to, so the lambda's scope has no `bindings` and `bind` returns its argument.

A stage that does not want bindings builds its scope without them (`bindings=None`); the
expressions then inline everything: correct, but larger plans.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

_NAME_COUNTER = itertools.count()
_NAME_RE = re.compile(r"__mqlb(\d+)__")
#: Functions whose repeated calls must not be merged into one binding.
_NONDETERMINISTIC = ("uuid(", "rand(", "randn(", "reflect(", "current_", "now(", "shuffle(")


class _NotConstant:
    """Marker for `Expr.const`: the expression's value is not known at compile time."""

    def __repr__(self) -> str:
        return "NOT_CONSTANT"


NOT_CONSTANT: Any = _NotConstant()


@dataclass(frozen=True)
class Expr:
    """A compiled MQL expression: a VARIANT value and a per-document error.

    `value` follows the encoding in `values.py` (SQL NULL = missing). `error` is a STRING
    column holding MongoDB's error message for documents where evaluation failed (and NULL
    where it succeeded), or `None` when the expression can never fail. Where `error` is
    non-NULL, `value` is meaningless.

    `kinds` is the set of MQL type names the value can have (`"missing"` included when it can
    be missing), or `None` when unknown; `const` is the JSON value when it is a compile-time
    constant; `cheap` says `value` is a plain column reference that may be repeated freely.
    `pair`, when set, is one `STRUCT<v: VARIANT, e: STRING>` column holding both `value` and
    `error` (operators compiled inside lambdas produce it, so a consumer can take both
    without duplicating the expression).
    """

    value: Column
    error: Column | None = None
    kinds: frozenset[str] | None = None
    const: Any = NOT_CONSTANT
    cheap: bool = False
    pair: Column | None = None

    @property
    def is_const(self) -> bool:
        """True when the value is a compile-time constant (see `const`)."""
        return self.const is not NOT_CONSTANT

    @property
    def static_kind(self) -> str | None:
        """The value's MQL type name when it is the same for every document."""
        if self.kinds is not None and len(self.kinds) == 1:
            return next(iter(self.kinds))
        return None

    def error_or_null(self) -> Column:
        """The error column, or a NULL string column when the expression cannot fail."""
        return self.error if self.error is not None else F.lit(None).cast("string")


@dataclass(frozen=True)
class Predicate:
    """A compiled query filter: a non-NULL BOOLEAN condition and a per-document error."""

    condition: Column
    error: Column | None = None


@dataclass(eq=False)
class Bindings:
    """Columns to materialise before the expressions that reference them (in order)."""

    entries: list[tuple[str, Column, int]] = field(default_factory=list)
    _by_text: dict[str, str] = field(default_factory=dict)

    def bind(self, col: Column) -> Column:
        """Record `col` under a fresh name and return a reference to that column.

        Binding an expression identical to an earlier one (e.g. `"$a"` used twice) returns
        the earlier column: a free common-subexpression elimination. Non-deterministic
        expressions (`uuid()`, wall clock) are never merged.
        """
        text = str(col)
        deterministic = not any(token in text.lower() for token in _NONDETERMINISTIC)
        if deterministic and text in self._by_text:
            return F.col(self._by_text[text])
        name = f"__mqlb{next(_NAME_COUNTER)}__"
        self.entries.append((name, col, self._level_of(text)))
        if deterministic:
            self._by_text[text] = name
        return F.col(name)

    @property
    def names(self) -> list[str]:
        """The temporary column names, in creation order."""
        return [name for name, _, _ in self.entries]

    def _level_of(self, text: str) -> int:
        # A binding may only reference bindings made before it; its level is one more than the
        # deepest of those, so each level can be added with a single `withColumns`.
        levels = {name: level for name, _, level in self.entries}
        refs = {f"__mqlb{n}__" for n in _NAME_RE.findall(text)}
        return 1 + max((levels[r] for r in refs if r in levels), default=0)


@dataclass(frozen=True)
class Scope:
    """What an expression can see: the document, stream metadata and variables.

    `current` is what field paths (`"$a.b"`) read; `root` is `$$ROOT`. `meta` is the stream
    metadata object read by `{$meta: "stream..."}`. `variables` maps variable names without
    the `$$` (`"this"`, `"value"`, `let` names) to VARIANT columns, which may be Spark
    lambda variables inside higher-order functions. `bindings` collects shared
    subexpressions to materialise (see the module docstring); `None` inlines them.
    """

    root: Column
    current: Column
    meta: Column
    variables: Mapping[str, Column] = field(default_factory=dict)
    bindings: Bindings | None = None

    @classmethod
    def for_document(cls, doc: Column, meta: Column, bindings: Bindings | None = None) -> Scope:
        """The scope of a stage evaluating against document `doc`."""
        return cls(root=doc, current=doc, meta=meta, bindings=bindings)

    def with_variables(self, **variables: Column) -> Scope:
        """A child scope with extra variables bound (shadowing outer ones)."""
        return replace(self, variables={**self.variables, **variables})

    def in_lambda(self, **variables: Column) -> Scope:
        """The scope inside a higher-order-function lambda: no bindings, extra variables."""
        return replace(self, variables={**self.variables, **variables}, bindings=None)

    def bind(self, col: Column) -> Column:
        """Materialise `col` as a temporary column and return a reference to it.

        Returns `col` itself when this scope has no bindings (inside lambdas).
        """
        return col if self.bindings is None else self.bindings.bind(col)


def apply_bindings(df: DataFrame, bindings: Bindings | None) -> DataFrame:
    """Add the bound temporary columns to `df`, one `withColumns` per dependency level."""
    if bindings is None or not bindings.entries:
        return df
    by_level: dict[int, dict[str, Column]] = {}
    for name, col, level in bindings.entries:
        by_level.setdefault(level, {})[name] = col
    for level in sorted(by_level):
        df = df.withColumns(by_level[level])
    return df


def drop_bindings(df: DataFrame, bindings: Bindings | None) -> DataFrame:
    """Drop the temporary columns `apply_bindings` added."""
    if bindings is None or not bindings.entries:
        return df
    return df.drop(*bindings.names)
