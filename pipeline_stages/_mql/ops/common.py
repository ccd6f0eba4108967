"""Shared machinery of the operator modules: the compile context, operands, errors.

Every operator compiler has the signature `(ctx: Ctx) -> Expr`. `ctx.spec` is the operator's
raw argument, `ctx.path` the JSON pointer of the operator key, and `ctx.sub(...)` compiles a
nested expression. Operands go through `ctx.arg(expr)`, which materialises the value and its
type tag once (see `Scope.bind`) so that the many type checks an operator makes all read the
same two cheap columns.

Errors: an operator's `Expr.error` is the first argument error (in argument order), else its
own error. MongoDB evaluates arguments left to right and stops at the first failure, so
"first argument's error" matches it for everything but short-circuiting operators, which
build their errors themselves (`$cond`, `$switch`, `$ifNull`, `$and`, `$or`, `$convert`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.classic.column import _to_seq
from pyspark.sql.functions.builtin import _unresolved_named_lambda_variable

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.scope import NOT_CONSTANT, Expr, Scope

CompileFn = Callable[[Any, Scope, str, ProblemCollector], Expr]

ANY_NUMBER = frozenset({"int", "long", "double", "decimal"})
NULLISH = frozenset({"missing", "null"})


@dataclass(frozen=True)
class Arg:
    """An operand ready for repeated use: cheap value and type-tag columns, plus its error.

    `k` is what to pass as `kind` to the `values` helpers: the static type name when known
    (so checks fold away in Python), else the tag column.
    """

    value: Column
    kind: Column
    static: str | None
    error: Column | None
    const: Any = NOT_CONSTANT
    kinds: frozenset[str] | None = None

    @property
    def k(self) -> K.Kind:
        """The type tag to hand to `values` helpers."""
        return self.static if self.static is not None else self.kind

    def kind_in(self, names: Iterable[str]) -> Column:
        """A BOOLEAN: the operand's type is one of `names`."""
        return K.kind_in(self.k, tuple(names))

    @property
    def nullish(self) -> Column:
        """True when the operand is missing or null."""
        return K.is_nullish(self.value, self.k)

    @property
    def is_const(self) -> bool:
        """True when the operand is a compile-time constant."""
        return self.const is not NOT_CONSTANT


def transform_with(array: Column, var: Column, body: Column) -> Column:
    """`transform(array, var -> body)` for a lambda variable created before its body.

    PySpark's `F.transform` creates the variable itself and calls back for the body; a let
    frame needs the variable first (operands are packed while the operator compiles).
    """
    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        raise RuntimeError("compiling MQL expressions needs an active SparkContext")
    jvm = sc._jvm
    fn = jvm.PythonSQLUtils.lambdaFunction(body._jc, _to_seq(sc, [var._jc]))
    return Column(jvm.PythonSQLUtils.fn("transform", _to_seq(sc, [array._jc, fn])))


def let(fields: list[Column], var: Column, body: Column) -> Column:
    """Evaluate `fields` once into struct variable `var`, then `body` (a local `let`)."""
    return F.try_element_at(transform_with(F.array(F.struct(*fields)), var, body), F.lit(1))


@dataclass(eq=False)
class LetFrame:
    """The operands of one operator compiled where no bindings exist (inside lambdas).

    Without bindings, an operand referenced ten times would be inlined ten times, and nested
    operators multiply that. Instead each non-trivial operand is evaluated once into a field
    of a lambda variable (`let`): values first, then their type tags from the cheap values;
    the operator's body refers to the fields. See `wrap`.
    """

    values_var: Column
    kinds_var: Column
    values: list[Column] = field(default_factory=list)
    kinds: list[Column] = field(default_factory=list)
    derived: list[tuple[Column, Column]] = field(default_factory=list)

    @classmethod
    def new(cls) -> LetFrame:
        """A frame with fresh lambda variables."""
        return cls(_unresolved_named_lambda_variable("v"), _unresolved_named_lambda_variable("k"))

    def add_value(self, col: Column) -> Column:
        """Evaluate `col` once; returns the cheap reference to its field."""
        name = f"f{len(self.values)}"
        self.values.append(col.alias(name))
        return self.values_var[name]

    def add_kind(self, col: Column) -> Column:
        """Evaluate a type tag (of already packed values) once; returns its reference."""
        name = f"k{len(self.kinds)}"
        self.kinds.append(col.alias(name))
        return self.kinds_var[name]

    def add_derived(self, col: Column) -> Column:
        """Evaluate an intermediate result once (`Ctx.bind` inside lambdas)."""
        var = _unresolved_named_lambda_variable("d")
        self.derived.append((var, col.alias("d")))
        return var["d"]

    def wrap(self, out: Expr) -> Expr:
        """The operator's result with the let frames around it, as a `pair` column."""
        if not self.values and not self.kinds and not self.derived:
            return out
        body = F.struct(out.value.alias("v"), out.error_or_null().alias("e"))
        # Each derived value may use the earlier ones: nest them, the first outermost.
        for var, col in reversed(self.derived):
            body = let([col], var, body)
        if self.kinds:
            body = let(self.kinds, self.kinds_var, body)
        if self.values:
            body = let(self.values, self.values_var, body)
        error = body["e"] if out.error is not None else None
        return Expr(value=body["v"], error=error, kinds=out.kinds, pair=body)


def pair_of(expr: Expr) -> Column:
    """`expr` as one `STRUCT<v, e>` column."""
    if expr.pair is not None:
        return expr.pair
    return F.struct(expr.value.alias("v"), expr.error_or_null().alias("e"))


@dataclass(frozen=True)
class Ctx:
    """Everything an operator compiler needs."""

    op: str
    spec: Any
    path: str
    scope: Scope
    problems: ProblemCollector
    compile_fn: CompileFn
    frame: LetFrame | None = None

    def sub(self, spec: Any, *tokens: str | int, scope: Scope | None = None) -> Expr:
        """Compile a nested expression found at `tokens` below the operator."""
        return self.compile_fn(
            spec, scope or self.scope, join_path(self.path, *tokens), self.problems
        )

    def with_scope(self, scope: Scope) -> Ctx:
        """The same context over another scope."""
        return replace(self, scope=scope)

    def fail(
        self, message: str, *tokens: str | int, code: str = ProblemCode.INVALID_ARGUMENTS
    ) -> Expr:
        """Record a compile-time problem at `tokens` and return a placeholder expression."""
        self.problems.error(join_path(self.path, *tokens), str(code), message)
        return placeholder()

    def unsupported(self, message: str, *tokens: str | int) -> Expr:
        """Record an `unsupported_option` problem and return a placeholder."""
        return self.fail(message, *tokens, code=ProblemCode.UNSUPPORTED_OPTION)

    def bind(self, col: Column) -> Column:
        """Evaluate `col` once: a binding (see `Scope.bind`), or a let inside lambdas."""
        if self.frame is not None:
            return self.frame.add_derived(col)
        return self.scope.bind(col)

    def use(self, expr: Expr) -> Expr:
        """`expr` with its value (and error) evaluated once: bound, or packed in the frame."""
        if expr.cheap or expr.is_const:
            return expr
        if self.frame is None:
            return replace(expr, value=self.scope.bind(expr.value), cheap=True, pair=None)
        if expr.error is None:
            return replace(expr, value=self.frame.add_value(expr.value), cheap=True, pair=None)
        packed = self.frame.add_value(pair_of(expr))
        return replace(expr, value=packed["v"], error=packed["e"], cheap=True, pair=None)

    def arg(self, expr: Expr) -> Arg:
        """Turn a compiled operand into an `Arg` with its value and type tag materialised."""
        used = self.use(expr)
        value, static = used.value, used.static_kind
        if static is not None:
            kind = F.lit(static)
        elif self.frame is None:
            kind = self.scope.bind(narrow_kind(value, expr.kinds))
        else:
            kind = self.frame.add_kind(narrow_kind(value, expr.kinds))
        return Arg(value, kind, static, used.error, expr.const, expr.kinds)


def narrow_kind(value: Column, kinds: frozenset[str] | None) -> Column:
    """The type tag of `value`, using what is statically known to keep it cheap."""
    if kinds is not None:
        concrete = kinds - NULLISH
        if len(concrete) == 1:
            tag = F.when(value.isNull(), F.lit("missing"))
            tag = tag.when(F.is_variant_null(value), F.lit("null"))
            return tag.otherwise(F.lit(next(iter(concrete))))
    return K.kind_of(value)


def placeholder() -> Expr:
    """What a broken sub-expression compiles to (the pipeline is rejected anyway)."""
    return Expr(value=V.null(), kinds=frozenset({"null"}), const=None)


def constant(value: Any) -> Expr:
    """A compile-time constant expression."""
    return Expr(
        value=V.literal(value), kinds=frozenset({V.literal_kind(value)}), const=value, cheap=True
    )


def first_error(*errors: Column | None) -> Column | None:
    """The first non-NULL error among `errors` (in order), or None when none can fail."""
    present = [e for e in errors if e is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else F.coalesce(*present)


def result(
    value: Column,
    *arg_errors: Column | None,
    own: Column | None = None,
    kinds: Iterable[str] | None = None,
) -> Expr:
    """Build an operator's `Expr`: argument errors first, then the operator's own error."""
    return Expr(
        value=value,
        error=first_error(*arg_errors, own),
        kinds=frozenset(kinds) if kinds is not None else None,
    )


def errors_of(args: Iterable[Arg | Expr]) -> list[Column | None]:
    """The error columns of some operands, in order."""
    return [a.error for a in args]


def kind_text(arg: Arg) -> Column | str:
    """The operand's MQL type name, for messages."""
    return arg.static if arg.static is not None else arg.kind


def positional(ctx: Ctx, min_n: int, max_n: int | None = None) -> list[Expr] | None:
    """Compile the operands of an operator taking an argument list (or one bare argument).

    Records MongoDB's arity message and returns None when the count is wrong.
    """
    items = ctx.spec if isinstance(ctx.spec, list) else [ctx.spec]
    n = len(items)
    if min_n <= n and (max_n is None or n <= max_n):
        if isinstance(ctx.spec, list):
            return [ctx.sub(item, i) for i, item in enumerate(items)]
        return [ctx.sub(ctx.spec)]
    if max_n == min_n:
        msg = f"Expression {ctx.op} takes exactly {min_n} arguments. {n} were passed in."
    elif max_n is None:
        msg = f"Expression {ctx.op} takes at least {min_n} arguments, but {n} were passed in."
    else:
        msg = (
            f"Expression {ctx.op} takes at least {min_n} arguments, and at most {max_n}, "
            f"but {n} were passed in."
        )
    ctx.fail(msg)
    return None


def named(
    ctx: Ctx, required: Iterable[str], optional: Iterable[str] = (), what: str = "parameter"
) -> dict[str, Any] | None:
    """Validate an object of named arguments; returns the raw specs, or None if invalid."""
    if not isinstance(ctx.spec, dict):
        ctx.fail(f"{ctx.op} only supports an object as its argument")
        return None
    allowed = set(required) | set(optional)
    ok = True
    for key in ctx.spec:
        if key not in allowed:
            ctx.fail(f"Unrecognized {what} to {ctx.op}: {key}", key)
            ok = False
    for key in required:
        if key not in ctx.spec:
            ctx.fail(f"Missing '{key}' parameter to {ctx.op}")
            ok = False
    return dict(ctx.spec) if ok else None


def when_all(pairs: list[tuple[Column, Column]], otherwise: Column | None = None) -> Column:
    """`CASE WHEN c1 THEN v1 WHEN c2 THEN v2 ... [ELSE otherwise] END`."""
    expr = F.when(pairs[0][0], pairs[0][1])
    for cond, val in pairs[1:]:
        expr = expr.when(cond, val)
    return expr.otherwise(otherwise) if otherwise is not None else expr


def null_if_nullish(args: list[Arg], value: Column) -> Column:
    """`null` when any operand is nullish, else `value`."""
    any_null = F.lit(False)
    for a in args:
        if a.static is None or a.static in NULLISH:
            any_null = any_null | a.nullish
    return F.when(any_null, V.null()).otherwise(value)


def valid_variable_name(ctx: Ctx, name: Any, *tokens: str | int) -> bool:
    """MongoDB's rule for user variable names (`as`, `$let` vars); records a problem if bad."""
    if not isinstance(name, str) or not name:
        ctx.fail(f"empty variable names are not allowed: {name!r}", *tokens)
        return False
    first = name[0]
    if not (first.islower() and first.isascii()) and first.isascii():
        ctx.fail(f"'{name}' starts with an invalid character for a user variable name", *tokens)
        return False
    for ch in name[1:]:
        if ch.isascii() and not (ch.isalnum() or ch == "_"):
            ctx.fail(f"'{name}' contains an invalid character for a variable name: '{ch}'", *tokens)
            return False
    return True


def first_element_error(errors: Column) -> Column:
    """The first non-NULL entry of an `ARRAY<STRING>` of per-element errors, or NULL."""
    return F.try_element_at(F.array_compact(errors), F.lit(1))


def with_kind(element: Column, build: Callable[[Column], Column]) -> Column:
    """`build(kind)` where `kind` is `element`'s type tag, computed once (lambda bodies)."""
    var = _unresolved_named_lambda_variable("t")
    return let([K.kind_of(element).alias("k")], var, build(var["k"]))


def in_frame(ctx: Ctx, scope: Scope, build: Callable[[Ctx], Column]) -> Column:
    """Build a column over `scope` (a lambda's) with its own let frame for `ctx.arg` calls."""
    frame = LetFrame.new()
    column = build(replace(ctx, scope=scope, frame=frame))
    return frame.wrap(Expr(value=column)).value
