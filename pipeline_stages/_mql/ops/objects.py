"""Object operators: `$mergeObjects $getField $setField $unsetField $objectToArray
$arrayToObject`.

VARIANT objects keep their keys sorted by name, so `$objectToArray` lists fields in name
order, not insertion order as MongoDB does. `$getField`/`$setField`/`$unsetField` need a
constant `field` name (as MongoDB 5.0 did); it may contain dots or start with `$`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    errors_of,
    first_element_error,
    kind_text,
    placeholder,
    positional,
    result,
    when_all,
)
from pipeline_stages._mql.ops.messages import message
from pipeline_stages._mql.ops.paths import delete_key, set_key
from pipeline_stages._mql.ops.paths import get_field as field_of
from pipeline_stages._mql.scope import Expr

_MAP = "map<string, variant>"


def _no_error() -> Column:
    return F.lit(None).cast("string")


def _empty_map() -> Column:
    return F.create_map().cast(_MAP)


def _absent_from(part: Column) -> Callable[[Column, Column], Column]:
    return lambda k, _: ~F.map_contains_key(part, k)


def merge_objects(ctx: Ctx) -> Expr:
    """`$mergeObjects`: later objects' fields win; null and missing arguments are ignored."""
    compiled = positional(ctx, 0)
    if compiled is None:
        return placeholder()
    args = [ctx.arg(e) for e in compiled]
    merged = _empty_map()
    for a in args:
        part = F.when(a.kind_in(("object",)), V.as_object_map(a.value, "object")).otherwise(
            _empty_map()
        )
        part = ctx.bind(part) if len(args) > 1 else part
        merged = F.map_concat(F.map_filter(merged, _absent_from(part)), part)
    checks = [
        (
            ~a.nullish & ~a.kind_in(("object",)),
            message(
                "$mergeObjects requires object inputs, but input ",
                F.to_json(a.value),
                " is of type ",
                kind_text(a),
            ),
        )
        for a in args
    ]
    own = when_all(checks) if checks else None
    return result(F.to_variant_object(merged), *errors_of(args), own=own, kinds={"object"})


def _field_name(ctx: Ctx, spec: Any) -> str | None:
    field = ctx.sub(spec, "field")
    if not field.is_const:
        ctx.unsupported(f"{ctx.op} requires a constant 'field' in Sluice", "field")
        return None
    if not isinstance(field.const, str):
        ctx.fail(
            f"{ctx.op} requires 'field' to evaluate to type String, but got {V.literal_kind(field.const)}",
            "field",
        )
        return None
    return field.const


def _field_spec(
    ctx: Ctx, required: tuple[str, ...], optional: tuple[str, ...]
) -> dict[str, Any] | None:
    spec = ctx.spec
    if isinstance(spec, str) and ctx.op == "$getField":
        return {"field": spec}
    if not isinstance(spec, dict) or (spec and next(iter(spec)).startswith("$")):
        if ctx.op == "$getField":
            return {"field": spec}
        ctx.fail(f"{ctx.op} only supports an object as its argument")
        return None
    for key in spec:
        if key not in required + optional:
            ctx.fail(f"{ctx.op} found an unknown argument: {key}", key)
            return None
    for key in required:
        if key not in spec:
            ctx.fail(f"{ctx.op} requires '{key}' to be specified")
            return None
    return dict(spec)


def _input(ctx: Ctx, spec: dict[str, Any]) -> Arg:
    if "input" in spec:
        return ctx.arg(ctx.sub(spec["input"], "input"))
    return ctx.arg(Expr(value=ctx.scope.current, cheap=True, kinds=frozenset({"object"})))


def get_field_op(ctx: Ctx) -> Expr:
    """`$getField`: a field by literal name (dots and `$` allowed)."""
    spec = _field_spec(ctx, ("field",), ("input",))
    if spec is None:
        return placeholder()
    name = _field_name(ctx, spec["field"])
    if name is None:
        return placeholder()
    a = _input(ctx, spec)
    value = (
        F.when(K.is_missing(a.value), V.missing())
        .when(a.nullish, V.null())
        .otherwise(F.when(a.kind_in(("object",)), field_of(a.value, name)))
    )
    return result(value, a.error)


def _set_or_unset(ctx: Ctx, *, unset: bool) -> Expr:
    required = ("field", "input") if unset else ("field", "input", "value")
    spec = _field_spec(ctx, required, ())
    if spec is None:
        return placeholder()
    name = _field_name(ctx, spec["field"])
    if name is None:
        return placeholder()
    a = _input(ctx, spec)
    errors = [a.error]
    if unset:
        updated = delete_key(a.value, name)
    else:
        new = ctx.sub(spec["value"], "value")
        errors.append(new.error)
        updated = F.when(new.value.isNull(), delete_key(a.value, name)).otherwise(
            set_key(a.value, name, new.value)
        )
    own = F.when(
        ~a.nullish & ~a.kind_in(("object",)),
        F.lit(f"{ctx.op} requires 'input' to evaluate to type Object"),
    )
    value = F.when(a.nullish, V.null()).otherwise(updated)
    return result(value, *errors, own=own, kinds={"object", "null"})


def object_to_array(ctx: Ctx) -> Expr:
    """`$objectToArray`: `[{k, v}, ...]` (fields in name order)."""
    compiled = positional(ctx, 1, 1)
    if compiled is None:
        return placeholder()
    a = ctx.arg(compiled[0])
    entries = F.map_entries(V.as_object_map(a.value, a.k))
    pairs = F.transform(
        entries,
        lambda e: F.to_variant_object(F.named_struct(F.lit("k"), e["key"], F.lit("v"), e["value"])),
    )
    own = F.when(
        ~a.nullish & ~a.kind_in(("object",)),
        message("$objectToArray requires a document input, found: ", kind_text(a)),
    )
    value = F.when(a.nullish, V.null()).otherwise(V.from_array(pairs))
    return result(value, a.error, own=own, kinds={"array", "null"})


def _pair_of_array(e: Column) -> tuple[Column, Column, Column]:
    """(key, value, error) for a `[key, value]` element."""
    key = F.try_variant_get(e, "$[0]", "variant")
    size = F.size(F.try_variant_get(e, "$", "array<variant>"))
    error = when_all(
        [
            (
                ~K.is_array_value(e),
                message(
                    "$arrayToObject requires a consistent input format. Elements mustall be arrays or all be objects. Array was detected, now found: ",
                    K.kind_of(e),
                ),
            ),
            (
                size != 2,
                message(
                    "$arrayToObject requires an array of size 2 arrays,found array of size: ",
                    size.cast("string"),
                ),
            ),
            (
                K.kind_of(key) != "string",
                message(
                    "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: ",
                    K.kind_of(key),
                ),
            ),
        ]
    )
    return V.as_string(key, "string"), F.try_variant_get(e, "$[1]", "variant"), error


def _pair_of_object(e: Column) -> tuple[Column, Column, Column]:
    """(key, value, error) for a `{k: key, v: value}` element."""
    key, value = field_of(e, "k"), field_of(e, "v")
    count = F.size(F.map_keys(F.try_variant_get(e, "$", _MAP)))
    error = when_all(
        [
            (
                K.kind_of(e) != "object",
                message(
                    "$arrayToObject requires a consistent input format. Elements mustall be arrays or all be objects. Object was detected, now found: ",
                    K.kind_of(e),
                ),
            ),
            (
                count != 2,
                message(
                    "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:",
                    count.cast("string"),
                ),
            ),
            (
                key.isNull() | value.isNull(),
                message(
                    "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: ",
                    F.to_json(e),
                ),
            ),
            (
                K.kind_of(key) != "string",
                message(
                    "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string. Found type: ",
                    K.kind_of(key),
                ),
            ),
        ]
    )
    return V.as_string(key, "string"), value, error


def array_to_object(ctx: Ctx) -> Expr:
    """`$arrayToObject`: from `[[k, v], ...]` or `[{k, v}, ...]`; a repeated key keeps its last value."""
    compiled = positional(ctx, 1, 1)
    if compiled is None:
        return placeholder()
    a = ctx.arg(compiled[0])
    items = ctx.bind(V.as_array(a.value, a.k))
    first = F.try_element_at(items, F.lit(1))
    first_is_array = K.is_array_value(first)

    def entry(e: Column) -> Column:
        ak, av, aerr = _pair_of_array(e)
        ok, ov, oerr = _pair_of_object(e)
        key = F.when(first_is_array, ak).otherwise(ok)
        return F.struct(
            key.alias("key"),
            F.when(first_is_array, av).otherwise(ov).alias("value"),
            F.when(first_is_array, aerr).otherwise(oerr).alias("e"),
        )

    entries = ctx.bind(F.transform(items, entry))
    keys = F.transform(entries, lambda x: x["key"])
    last = F.filter(
        entries,
        lambda x, i: (
            x["key"].isNotNull()
            & (F.array_position(F.slice(keys, i + 2, F.size(keys) + 1), x["key"]) == 0)
        ),
    )
    obj = F.to_variant_object(
        F.map_from_entries(
            F.transform(last, lambda x: F.struct(x["key"].alias("key"), x["value"].alias("value")))
        )
    )
    first_kind = K.kind_of(first)
    own = when_all(
        [
            (a.nullish, _no_error()),
            (
                ~a.kind_in(("array",)),
                message("$arrayToObject requires an array input, found: ", kind_text(a)),
            ),
            (F.size(items) == 0, _no_error()),
            (
                ~first_kind.isin("array", "object"),
                message("Unrecognised input type format for $arrayToObject: ", first_kind),
            ),
        ],
        first_element_error(F.transform(entries, lambda x: x["e"])),
    )
    value = F.when(a.nullish, V.null()).otherwise(obj)
    return result(value, a.error, own=own, kinds={"object", "null"})


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$mergeObjects": merge_objects,
    "$getField": get_field_op,
    "$setField": lambda ctx: _set_or_unset(ctx, unset=False),
    "$unsetField": lambda ctx: _set_or_unset(ctx, unset=True),
    "$objectToArray": object_to_array,
    "$arrayToObject": array_to_object,
}
