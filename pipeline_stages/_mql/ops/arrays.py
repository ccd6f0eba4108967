"""Array operators (`$map`/`$filter`/`$reduce` are in `ops_lambdas`).

Element comparisons (`$in`, `$indexOfArray`) use MQL equality; `$in` against a literal list
compiles to one comparison per constant, with the constant's type known.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import order as O
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    errors_of,
    kind_text,
    placeholder,
    positional,
    result,
    when_all,
    with_kind,
)
from pipeline_stages._mql.ops.messages import message, number_text
from pipeline_stages._mql.scope import Expr


def _no_error() -> Column:
    return F.lit(None).cast("string")


def _args(ctx: Ctx, min_n: int, max_n: int | None = None) -> list[Arg] | None:
    compiled = positional(ctx, min_n, max_n)
    return None if compiled is None else [ctx.arg(e) for e in compiled]


def _is_array(a: Arg) -> Column:
    return a.kind_in(("array",))


def _items(a: Arg) -> Column:
    return V.as_array(a.value, a.k)


def size(ctx: Ctx) -> Expr:
    """`$size`: the number of elements (an error for anything but an array)."""
    args = _args(ctx, 1, 1)
    if args is None:
        return placeholder()
    a = args[0]
    own = F.when(
        ~_is_array(a),
        message("The argument to $size must be an array, but was of type: ", kind_text(a)),
    )
    return result(V.from_long(F.size(_items(a))), a.error, own=own, kinds={"int"})


def _elem_at(ctx: Ctx, arr: Arg, index: Column, index_arg: Arg | None, arity_one: bool) -> Expr:
    what = "argument" if arity_one else "first argument"
    checks = [
        (arr.nullish, _no_error()),
        (~_is_array(arr), message(f"{ctx.op}'s {what} must be an array, but is ", kind_text(arr))),
    ]
    nullish = arr.nullish
    errors = [arr.error]
    if index_arg is not None:
        nullish = nullish | index_arg.nullish
        checks[0] = (nullish, _no_error())
        checks.append(
            (
                ~index_arg.kind_in(K.NUMERIC_TYPES),
                message(
                    f"{ctx.op}'s second argument must be a numeric value, but is ",
                    kind_text(index_arg),
                ),
            )
        )
        checks.append(
            (
                (index.isNull()) | (index < K.INT32_MIN) | (index > K.INT32_MAX),
                message(
                    f"{ctx.op}'s second argument must be representable as a 32-bit integer: ",
                    number_text(V.as_double(index_arg.value, index_arg.k)),
                ),
            )
        )
        errors.append(index_arg.error)
    position = F.when(index >= 0, F.least(index + 1, F.lit(K.INT32_MAX))).otherwise(
        F.greatest(index, F.lit(K.INT32_MIN))
    )
    picked = F.try_element_at(_items(arr), position.cast("int"))
    return result(F.when(nullish, V.null()).otherwise(picked), *errors, own=when_all(checks))


def array_elem_at(ctx: Ctx) -> Expr:
    """`$arrayElemAt`: negative indexes count from the end; out of range is missing."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    arr, idx = args
    return _elem_at(ctx, arr, V.as_whole_number(idx.value, idx.k), idx, arity_one=False)


def _first_last(ctx: Ctx) -> Expr:
    args = _args(ctx, 1, 1)
    if args is None:
        return placeholder()
    index = F.lit(0 if ctx.op == "$first" else -1).cast("bigint")
    return _elem_at(ctx, args[0], index, None, arity_one=True)


def in_(ctx: Ctx) -> Expr:
    """`$in`: whether the value equals (MQL equality) an element of the array."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    needle, arr = args
    own = F.when(
        ~_is_array(arr),
        message("$in requires an array as a second argument, found: ", kind_text(arr)),
    )
    if arr.is_const and isinstance(arr.const, list) and len(arr.const) <= 64:
        # A literal list (the common case) compares against each constant with its type
        # known: a few small comparisons instead of a lambda over the array.
        hits = [
            O.equals(needle.value, V.literal(c), needle.k, V.literal_kind(c)) for c in arr.const
        ]
        found = hits[0] if hits else F.lit(False)
        for hit in hits[1:]:
            found = found | hit
        return result(V.from_bool(found), needle.error, arr.error, kinds={"bool"})
    found = F.exists(
        _items(arr), lambda e: with_kind(e, lambda k: O.equals(e, needle.value, k, needle.k))
    )
    return result(
        V.from_bool(F.coalesce(found, F.lit(False))),
        needle.error,
        arr.error,
        own=own,
        kinds={"bool"},
    )


def is_array(ctx: Ctx) -> Expr:
    """`$isArray`."""
    args = _args(ctx, 1, 1)
    if args is None:
        return placeholder()
    return result(V.from_bool(_is_array(args[0])), args[0].error, kinds={"bool"})


def concat_arrays(ctx: Ctx) -> Expr:
    """`$concatArrays`: null if any argument is null or missing."""
    args = _args(ctx, 0)
    if args is None:
        return placeholder()
    if not args:
        return result(V.literal([]), kinds={"array"})
    pairs = []
    for a in args:
        pairs.append((a.nullish, _no_error()))
        pairs.append(
            (~_is_array(a), message("$concatArrays only supports arrays, not ", kind_text(a)))
        )
    nullish = F.lit(False)
    for a in args:
        nullish = nullish | a.nullish
    value = F.when(nullish, V.null()).otherwise(V.from_array(F.concat(*[_items(a) for a in args])))
    return result(value, *errors_of(args), own=when_all(pairs), kinds={"array", "null"})


def _slice_bounds(size: Column, first: Column, count: Column | None) -> tuple[Column, Column]:
    """1-based start and length for Spark's `slice`."""
    if count is None:
        start0 = F.when(first >= 0, F.lit(0)).otherwise(F.greatest(size + first, F.lit(0)))
        length = F.when(first >= 0, F.least(first, size)).otherwise(size - start0)
        return start0 + 1, length
    start0 = F.when(first < 0, F.greatest(size + first, F.lit(0))).otherwise(F.least(first, size))
    return start0 + 1, F.greatest(count, F.lit(0))


def slice_(ctx: Ctx) -> Expr:
    """`$slice`: `[array, n]` or `[array, position, n]`."""
    args = _args(ctx, 2, 3)
    if args is None:
        return placeholder()
    arr, second = args[0], args[1]
    third = args[2] if len(args) == 3 else None
    n2 = V.as_whole_number(second.value, second.k)
    checks = [
        (arr.nullish | second.nullish, _no_error()),
        (
            ~_is_array(arr),
            message("First argument to $slice must be an array, but is of type: ", kind_text(arr)),
        ),
        (
            ~second.kind_in(K.NUMERIC_TYPES),
            message(
                "Second argument to $slice must be a numeric value, but is of type: ",
                kind_text(second),
            ),
        ),
        (
            n2.isNull() | (F.abs(n2) > K.INT32_MAX),
            message(
                "Second argument to $slice can't be represented as a 32-bit integer: ",
                number_text(V.as_double(second.value, second.k)),
            ),
        ),
    ]
    nullish = arr.nullish | second.nullish
    n3 = None
    if third is not None:
        n3 = V.as_whole_number(third.value, third.k)
        nullish = nullish | third.nullish
        checks += [
            (third.nullish, _no_error()),
            (
                ~third.kind_in(K.NUMERIC_TYPES),
                message(
                    "Third argument to $slice must be numeric, but is of type: ", kind_text(third)
                ),
            ),
            (
                n3.isNull() | (F.abs(n3) > K.INT32_MAX),
                message(
                    "Third argument to $slice can't be represented as a 32-bit integer: ",
                    number_text(V.as_double(third.value, third.k)),
                ),
            ),
            (n3 <= 0, message("Third argument to $slice must be positive: ", n3.cast("string"))),
        ]
    items = _items(arr)
    start, length = _slice_bounds(F.size(items).cast("bigint"), n2, n3)
    sliced = F.slice(items, start.cast("int"), F.least(length, F.lit(K.INT32_MAX)).cast("int"))
    value = F.when(nullish, V.null()).otherwise(V.from_array(sliced))
    return result(value, *errors_of(args), own=when_all(checks), kinds={"array", "null"})


def reverse_array(ctx: Ctx) -> Expr:
    """`$reverseArray`."""
    args = _args(ctx, 1, 1)
    if args is None:
        return placeholder()
    a = args[0]
    own = F.when(
        ~a.nullish & ~_is_array(a),
        message("The argument to $reverseArray must be an array, but was of type: ", kind_text(a)),
    )
    value = F.when(a.nullish, V.null()).otherwise(V.from_array(F.reverse(_items(a))))
    return result(value, a.error, own=own, kinds={"array", "null"})


def index_of_array(ctx: Ctx) -> Expr:
    """`$indexOfArray`: `[array, value, start?, end?]`, -1 when absent."""
    args = _args(ctx, 2, 4)
    if args is None:
        return placeholder()
    arr, needle = args[0], args[1]
    checks = [
        (arr.nullish, _no_error()),
        (
            ~_is_array(arr),
            message("$indexOfArray requires an array as a first argument, found: ", kind_text(arr)),
        ),
    ]
    bounds = []
    for a, what in zip(args[2:], ("starting index", "ending index"), strict=False):
        n = V.as_whole_number(a.value, a.k)
        checks.append(
            (
                n.isNull(),
                message(
                    f"$indexOfArrayrequires an integral {what}, found a value of type: ",
                    kind_text(a),
                    ", with value: ",
                    F.to_json(a.value),
                ),
            )
        )
        checks.append(
            (
                n < 0,
                message(
                    f"$indexOfArray requires a nonnegative {what}, found: ", F.to_json(a.value)
                ),
            )
        )
        bounds.append(n)
    start = bounds[0] if bounds else F.lit(0)
    end = bounds[1] if len(bounds) > 1 else F.lit(K.INT32_MAX)
    hits = F.transform(
        _items(arr),
        lambda e, i: F.when(
            (i >= start)
            & (i < end)
            & with_kind(e, lambda k: O.equals(e, needle.value, k, needle.k)),
            i,
        ),
    )
    found = F.coalesce(F.try_element_at(F.array_compact(hits), F.lit(1)), F.lit(-1))
    value = F.when(arr.nullish, V.null()).otherwise(V.from_long(found))
    return result(value, *errors_of(args), own=when_all(checks), kinds={"int", "null"})


def range_(ctx: Ctx) -> Expr:
    """`$range`: `[start, end, step?]`, end excluded."""
    args = _args(ctx, 2, 3)
    if args is None:
        return placeholder()
    nums = [V.as_whole_number(a.value, a.k) for a in args]
    type_texts = (
        "starting value, found value of type: ",
        "ending value, found value of type: ",
        "step value, found value of type:",
    )
    range_texts = ("a starting value", "an ending value", "a step value")
    checks = []
    for a, n, type_text, range_text in zip(args, nums, type_texts, range_texts, strict=False):
        checks.append(
            (
                ~a.kind_in(K.NUMERIC_TYPES),
                message(f"$range requires a numeric {type_text}", kind_text(a)),
            )
        )
        checks.append(
            (
                n.isNull() | (F.abs(n) > K.INT32_MAX),
                message(
                    f"$range requires {range_text} that can be represented as a 32-bit integer, found value: ",
                    F.to_json(a.value),
                ),
            )
        )
    step = nums[2] if len(nums) > 2 else F.lit(1).cast("bigint")
    if len(nums) > 2:
        checks.append((step == 0, F.lit("$range requires a non-zero step value")))
    start, end = nums[0], nums[1]
    count = F.greatest(F.ceil(F.try_divide(end - start, step)), F.lit(0))
    count = F.when(step == 0, F.lit(0)).otherwise(count)
    indexes = F.when(
        count > 0, F.sequence(F.lit(0).cast("bigint"), (count - 1).cast("bigint"))
    ).otherwise(F.array().cast("array<bigint>"))
    values = F.transform(indexes, lambda i: V.from_long(start + i * step))
    return result(V.from_array(values), *errors_of(args), own=when_all(checks), kinds={"array"})


def _element_truth(ctx: Ctx) -> Expr:
    args = _args(ctx, 1, 1)
    if args is None:
        return placeholder()
    a = args[0]
    own = F.when(
        ~_is_array(a), message(f"{ctx.op}'s argument must be an array, but is ", kind_text(a))
    )
    test = F.forall if ctx.op == "$allElementsTrue" else F.exists
    value = test(_items(a), lambda e: with_kind(e, lambda k: O.truthy(e, k)))
    return result(V.from_bool(F.coalesce(value, F.lit(False))), a.error, own=own, kinds={"bool"})


# --------------------------------------------------------------------------- lambdas


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$size": size,
    "$arrayElemAt": array_elem_at,
    "$first": _first_last,
    "$last": _first_last,
    "$in": in_,
    "$isArray": is_array,
    "$concatArrays": concat_arrays,
    "$slice": slice_,
    "$reverseArray": reverse_array,
    "$indexOfArray": index_of_array,
    "$range": range_,
    "$allElementsTrue": _element_truth,
    "$anyElementTrue": _element_truth,
}
