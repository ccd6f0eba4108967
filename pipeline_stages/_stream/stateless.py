"""Spark compilation shared by the stateless document stages (`$addFields`, `$project`, …).

Each helper turns a stage body into a new document `Expr` evaluated against the incoming
document; the stage module then applies it to the frame with the Atlas operator name, so an
evaluation error fails only that document (atlas-semantics.md §3.3).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCollector, classify, join_path
from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.expressions import compile_expression
from pipeline_stages._mql.ops.common import first_error
from pipeline_stages._mql.ops.paths import empty_object, get_field, remove_field, set_field
from pipeline_stages._mql.scope import Expr, Scope
from pipeline_stages._stream.frame import StreamFrame


def is_operator_object(value: Any) -> bool:
    """True for `{$op: ...}` (an expression), false for a nested field specification."""
    return isinstance(value, dict) and bool(value) and next(iter(value)).startswith("$")


def flatten_fields(
    fields: dict[str, Any], prefix: str = ""
) -> list[tuple[str, Any, tuple[str, ...]]]:
    """`{a: {b: <expr>}}` → `[("a.b", <expr>, ("a", "b"))]`: nested specs become dotted paths."""
    flat: list[tuple[str, Any, tuple[str, ...]]] = []
    for name, value in fields.items():
        dotted = f"{prefix}{name}"
        if isinstance(value, dict) and value and not is_operator_object(value):
            for sub, expr, tokens in flatten_fields(value, dotted + "."):
                flat.append((sub, expr, (name, *tokens)))
        else:
            flat.append((dotted, value, (name,)))
    return flat


def add_fields(
    fields: dict[str, Any], scope: Scope, doc: Column, path: str, problems: ProblemCollector
) -> Expr:
    """The document with every field set to its expression, all evaluated on the input."""
    errors: list[Column | None] = []
    for dotted, raw, tokens in flatten_fields(fields):
        value = compile_expression(raw, scope, join_path(path, *tokens), problems)
        errors.append(value.error)
        # Each step references the document and the value several times: binding both keeps
        # the plan linear in the number of fields (inlined, six fields overflowed codegen).
        field_value = Expr(value=scope.bind(value.value))
        doc = scope.bind(set_field(doc, dotted, field_value).value)
    return Expr(value=doc, error=first_error(*errors))


def compile_add_fields(
    fields: dict[str, Any], frame: StreamFrame, ctx: Any, body_path: str, *, operator: str
) -> StreamFrame:
    """Compile and apply an `$addFields`/`$set` body (the two stages differ only by name)."""
    return apply_document(
        frame,
        lambda scope: add_fields(fields, scope, scope.current, body_path, ctx.problems),
        operator=operator,
    )


def unset_fields(doc: Column, dotted_paths: list[str]) -> Column:
    """The document without the given (dotted) fields."""
    for dotted in dotted_paths:
        doc = remove_field(doc, dotted)
    return doc


def apply_document(frame: StreamFrame, build: Any, *, operator: str) -> StreamFrame:
    """Compile `build(scope)` to a new document and apply it to the frame's healthy rows."""
    scope = frame.scope()
    result: Expr = build(scope)
    prepared = frame.prepared(scope)
    return prepared.with_doc(result, operator=operator).finished(scope)


def replace_root(new_root: Any, scope: Scope, path: str, problems: ProblemCollector) -> Expr:
    """`newRoot` evaluated; a result that is not an object is MongoDB's per-document error."""

    result = compile_expression(new_root, scope, path, problems)
    value = scope.bind(result.value)
    if result.static_kind == "object":
        return Expr(value=value, error=result.error)
    # The type tag only for the message: a plain-object test is one cast, `kind_of` per
    # document costs several (it was bound for every document before).
    not_object = F.concat(
        F.lit("'newRoot' expression must evaluate to an object, but resulting value was: "),
        F.coalesce(F.to_json(value), F.lit("MISSING")),
        F.lit(". Type of resulting value: '"),
        K.kind_of(value),
        F.lit("'."),
    )
    error = F.when(~K.is_plain_object(value), not_object)
    return Expr(value=value, error=first_error(result.error, error))


def project_document(
    fields: dict[str, Any],
    *,
    exclusion: bool,
    scope: Scope,
    path: str,
    problems: ProblemCollector,
) -> Expr:
    """`$project`: an exclusion removes fields; an inclusion builds a new document.

    In an inclusion projection `_id` is kept unless excluded; included paths copy the
    document's value (missing values stay missing) and computed fields are evaluated on the
    input document.
    """
    flat = flatten_fields(fields)
    if exclusion:
        removed = [dotted for dotted, raw, _ in flat if classify(raw) == "exclude"]
        return Expr(value=unset_fields(scope.current, removed))
    errors: list[Column | None] = []
    if not any(dotted == "_id" for dotted, _, _ in flat):
        flat = [("_id", 1, ("_id",)), *flat]
    # Top-level fields first, then each field with included paths below it projected as a
    # whole, then computed paths below a field (set into what the inclusion kept).
    top: list[tuple[str, Any, tuple[str, ...]]] = []
    included: dict[str, IncludeTree] = {}
    below: list[tuple[str, Any, tuple[str, ...]]] = []
    for dotted, raw, tokens in flat:
        kind = classify(raw)
        if kind == "exclude":
            continue
        if "." not in dotted:
            top.append((dotted, f"${dotted}" if kind == "include" else raw, tokens))
        elif kind == "include":
            _add_path(included, dotted.split("."))
        else:
            below.append((dotted, raw, tokens))

    def set_all(doc: Column, items: list[tuple[str, Any, tuple[str, ...]]]) -> Column:
        for dotted, source, tokens in items:
            value = compile_expression(source, scope, join_path(path, *tokens), problems)
            errors.append(value.error)
            doc = scope.bind(set_field(doc, dotted, Expr(value=scope.bind(value.value))).value)
        return doc

    doc = set_all(empty_object(), top)
    for name, tree in included.items():
        kept = included_paths(scope.bind(get_field(scope.current, name)), tree)
        doc = scope.bind(set_field(doc, name, Expr(value=scope.bind(kept))).value)
    doc = set_all(doc, below)
    return Expr(value=doc, error=first_error(*errors))


#: The included paths below a field: each name maps to the paths below it (empty: the whole
#: value is kept).
IncludeTree = dict[str, "IncludeTree"]
#: How many levels of arrays directly inside arrays an inclusion walks into (MongoDB walks
#: any number; each level doubles the generated code). Deeper arrays are dropped.
INCLUDED_ARRAY_DEPTH = 2


def _add_path(tree: IncludeTree, names: list[str]) -> None:
    for name in names[:-1]:
        tree = tree.setdefault(name, {})
    tree.setdefault(names[-1], {})


def included_paths(value: Column, tree: IncludeTree, arrays: int = INCLUDED_ARRAY_DEPTH) -> Column:
    """What an inclusion of the `tree`'s paths keeps of `value` (MongoDB's `$project`): of an
    object, the included fields that are present (each projected further), `{}` when none
    is; of an array, each element so projected, elements that are neither objects nor arrays
    dropped; of anything else, nothing (missing: SQL NULL)."""
    fields: dict[str, Column] = {}
    for name, below in tree.items():
        child = get_field(value, name)
        fields[name] = included_paths(child, below, arrays) if below else child
    names = F.array(*(F.lit(name) for name in fields))
    present = F.map_filter(
        F.map_from_arrays(names, F.array(*fields.values())), lambda _, v: v.isNotNull()
    )
    kept = F.when(K.is_plain_object(value), F.to_variant_object(present))
    if arrays == 0:
        return kept
    elements = F.transform(V.as_array(value), lambda e: included_paths(e, tree, arrays - 1))
    in_array = V.from_array(F.filter(elements, lambda e: e.isNotNull()))
    return F.coalesce(kept, F.when(K.is_array_value(value), in_array))
