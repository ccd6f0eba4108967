"""Reading and writing (dotted) fields of VARIANT documents with MongoDB's semantics.

Reading (`"$a.b"`) follows aggregation field paths: walking through an array applies the rest
of the path to each object element and yields the array of the non-missing results (elements
that are not objects are skipped), and numeric components are field names, never indexes.
The common all-objects case is a single `try_variant_get` with the full path; the array walk
is only evaluated when that finds nothing.

Writing follows `$addFields`/`$set`: setting `a.b` where `a` is an object adds or replaces `b`;
where `a` is an array, `b` is set in every element (non-object elements become `{b: ...}`);
where `a` is anything else or missing, `a` becomes `{b: ...}`. Setting a missing value removes
the field. `$unset`/`remove_field` removes the field, also inside array elements. Nested
arrays (arrays directly inside the traversed array) are left unchanged; MongoDB recurses into
them for `$addFields`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.functions.builtin import _unresolved_named_lambda_variable

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import let
from pipeline_stages._mql.scope import Expr


def key_path(names: list[str]) -> str | None:
    """The variant JSON path of nested object keys, or None when a key can't be quoted."""
    parts = []
    for name in names:
        if "'" not in name:
            parts.append(f"['{name}']")
        elif '"' not in name:
            parts.append(f'["{name}"]')
        else:
            return None
    return "$" + "".join(parts)


def get_field(value: Column, name: str) -> Column:
    """`value[name]` when `value` is an object holding `name`; NULL (missing) otherwise."""
    path = key_path([name])
    if path is None:
        return F.try_variant_get(value, "$", "map<string, variant>")[name]
    return F.try_variant_get(value, path, "variant")


def get_path(value: Column, names: list[str]) -> Column:
    """The value at `names` when every step is an object; NULL (missing) otherwise."""
    path = key_path(names)
    if path is not None:
        return F.try_variant_get(value, path, "variant")
    for name in names:
        value = get_field(value, name)
    return value


def object_path(doc: Column, names: list[str]) -> Column:
    """Aggregation field-path evaluation of `names` starting at object `doc`."""
    if len(names) == 1:
        return get_field(doc, names[0])
    slow: Column | None = None
    for k in range(1, len(names)):
        prefix = get_path(doc, names[:k])
        branch = F.when(K.is_array_value(prefix), array_path(prefix, names[k:]))
        slow = branch if slow is None else F.coalesce(slow, branch)
    if slow is None:
        raise ValueError("a field path has at least one name")
    return F.coalesce(get_path(doc, names), slow)


def array_path(array: Column, names: list[str]) -> Column:
    """The rest of a field path applied to each object element of `array`."""
    mapped = F.transform(
        V.as_array(array), lambda e: F.when(K.is_object_like(e), object_path(e, names))
    )
    return V.from_array(F.filter(mapped, lambda x: x.isNotNull()))


def value_path(value: Column, names: list[str]) -> Column:
    """A field path below a value of any type (variables: `$$this.a.b`)."""
    if not names:
        return value
    return F.when(K.is_object_like(value), object_path(value, names)).when(
        K.is_array_value(value), array_path(value, names)
    )


# --------------------------------------------------------------------------- writing


def empty_object() -> Column:
    """A new empty MQL object."""
    return F.parse_json(F.lit("{}"))


def set_key(obj: Column, name: str, value: Column) -> Column:
    """Object `obj` with key `name` set to `value` (a present value)."""
    path = key_path([name])
    if path is not None:
        return F.try_variant_set(obj, path, value)
    kept = F.map_filter(V.as_object_map(obj, "object"), lambda k, _: k != F.lit(name))
    return F.to_variant_object(F.map_concat(kept, F.create_map(F.lit(name), value)))


def delete_key(obj: Column, name: str) -> Column:
    """Object `obj` without key `name`."""
    path = key_path([name])
    if path is not None:
        return F.variant_delete(obj, path)
    kept = F.map_filter(V.as_object_map(obj, "object"), lambda k, _: k != F.lit(name))
    return F.to_variant_object(kept)


def _let_one(value: Column, build: Callable[[Column], Column]) -> Column:
    """`build(v)` with `value` evaluated once as `v` (documents are referenced repeatedly)."""
    var = _unresolved_named_lambda_variable("o")
    return let([value.alias("o")], var, build(var["o"]))


def _set_or_delete(obj: Column, name: str, value: Column) -> Column:
    """`obj` with `name` set to `value`, or removed when `value` is missing; `obj` used once."""
    path = key_path([name])
    if path is None:
        return _let_one(
            obj,
            lambda o: F.when(value.isNull(), delete_key(o, name)).otherwise(
                set_key(o, name, value)
            ),
        )
    placeholder = F.coalesce(value, V.null())
    return F.variant_delete(
        F.try_variant_set(obj, path, placeholder), F.when(value.isNull(), F.lit(path))
    )


def _set_in_object(obj: Column, names: list[str], value: Column) -> Column:
    """`obj` (cheap: referenced several times) with the dotted field set."""
    if len(names) == 1:
        return _set_or_delete(obj, names[0], value)
    child = get_field(obj, names[0])
    return set_key(obj, names[0], _set_below(child, names[1:], value, in_array=False))


def _set_below(child: Column, names: list[str], value: Column, *, in_array: bool) -> Column:
    base = F.when(K.is_object_like(child), child).otherwise(empty_object())
    on_object = _set_in_object(base, names, value)
    if in_array:
        return F.when(K.is_array_value(child), child).otherwise(on_object)
    on_array = V.from_array(
        F.transform(V.as_array(child), lambda e: _set_below(e, names, value, in_array=True))
    )
    return F.when(K.is_array_value(child), on_array).otherwise(on_object)


def set_field(doc: Column, dotted: str, value: Expr) -> Expr:
    """`doc` with the (dotted) field set to `value`, as `$addFields` does it.

    A missing `value` removes the field. The result's error is `value`'s error. `doc` is
    referenced once (a dotted path let-binds it), so chaining calls stays linear in plan
    size; `value` is referenced a few times, so pass a cheap (bound) column for a large one.
    """
    names = dotted.split(".")
    if len(names) == 1:
        return Expr(value=_set_or_delete(doc, names[0], value.value), error=value.error)
    path = key_path(names)

    def build(o: Column) -> Column:
        slow = _set_in_object(o, names, value.value)
        if path is None:
            return slow
        # All intermediates objects (or missing): Spark's path write does it in one step.
        placeholder = F.coalesce(value.value, V.null())
        missing = F.when(value.value.isNull(), F.lit(path))
        fast = F.variant_delete(F.try_variant_set(o, path, placeholder), missing)
        return F.coalesce(fast, slow)

    return Expr(value=_let_one(doc, build), error=value.error)


def _unset_in_object(obj: Column, names: list[str]) -> Column:
    """`obj` (cheap: referenced several times) without the dotted field."""
    if len(names) == 1:
        return delete_key(obj, names[0])
    rest = names[1:]
    child = get_field(obj, names[0])
    new_child = F.when(K.is_object_like(child), _unset_in_object(child, rest)).otherwise(
        V.from_array(
            F.transform(
                V.as_array(child),
                lambda e: F.when(K.is_object_like(e), _unset_in_object(e, rest)).otherwise(e),
            )
        )
    )
    touched = K.is_object_like(child) | K.is_array_value(child)
    return F.when(touched, set_key(obj, names[0], new_child)).otherwise(obj)


def remove_field(doc: Column, dotted: str) -> Column:
    """`doc` without the (dotted) field, as `$unset` does it (array elements included).

    `doc` is referenced once (a dotted path let-binds it), so chaining calls stays linear.
    """
    names = dotted.split(".")
    if len(names) == 1:
        return delete_key(doc, names[0])
    return _let_one(doc, lambda o: _unset_in_object(o, names))
