"""String operators.

Indexes and lengths are in code points (`$substrCP`, `$strLenCP`, `$indexOfCP`) or bytes
(`$substrBytes`, `$strLenBytes`), as in MongoDB. `$toLower`/`$toUpper` change ASCII letters
only, like the server. `$regexMatch` is in `ops_regex`.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from pipeline_stages._mql import kinds as K
from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    errors_of,
    kind_text,
    named,
    null_if_nullish,
    placeholder,
    positional,
    result,
    when_all,
)
from pipeline_stages._mql.ops.messages import message, number_text
from pipeline_stages._mql.scope import Expr

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = _UPPER.lower()
#: MongoDB's default `$trim` characters.
WHITESPACE = "\0 \t\n\x0b\x0c\r\u00a0\u1680" + "".join(chr(c) for c in range(0x2000, 0x200B))


def _no_error() -> Column:
    return F.lit(None).cast("string")


def _args(ctx: Ctx, min_n: int, max_n: int | None = None) -> list[Arg] | None:
    compiled = positional(ctx, min_n, max_n)
    return None if compiled is None else [ctx.arg(e) for e in compiled]


def coerce_to_string(a: Arg) -> tuple[Column, Column]:
    """MongoDB's `coerceToString`: null/missing -> "", numbers and dates -> text; else error."""
    as_double = V.as_double(a.value, a.k)
    text = when_all(
        [
            (a.nullish, F.lit("")),
            (a.kind_in(("string",)), V.as_string(a.value, "string")),
            (a.kind_in(K.INTEGRAL_TYPES), V.as_long(a.value, a.k).cast("string")),
            (a.kind_in(("double", "decimal")), number_text(as_double)),
            (a.kind_in(("date",)), F.date_format(V.as_timestamp(a.value, "date"), V.DATE_PATTERN)),
        ]
    )
    bad = ~a.kind_in(("missing", "null", "string", "int", "long", "double", "decimal", "date"))
    error = F.when(bad, message("can't convert from BSON type ", kind_text(a), " to String"))
    return text, error


def concat(ctx: Ctx) -> Expr:
    """`$concat`: strings only; null if any argument is null or missing."""
    args = _args(ctx, 0)
    if args is None:
        return placeholder()
    if not args:
        return result(V.from_string(F.lit("")), kinds={"string"})
    pairs = []
    for a in args:
        pairs.append((a.nullish, _no_error()))
        pairs.append(
            (~a.kind_in(("string",)), message("$concat only supports strings, not ", kind_text(a)))
        )
    own = None if all(a.static == "string" for a in args) else when_all(pairs)
    joined = F.concat(*[V.as_string(a.value, a.k) for a in args])
    return result(
        null_if_nullish(args, V.from_string(joined)),
        *errors_of(args),
        own=own,
        kinds={"string", "null"},
    )


def _case(upper: bool) -> Callable[[Ctx], Expr]:
    def compile_op(ctx: Ctx) -> Expr:
        args = _args(ctx, 1, 1)
        if args is None:
            return placeholder()
        text, error = coerce_to_string(args[0])
        changed = F.translate(text, _LOWER, _UPPER) if upper else F.translate(text, _UPPER, _LOWER)
        return result(V.from_string(changed), args[0].error, own=error, kinds={"string"})

    return compile_op


def _index_checks(
    op: str, a: Arg, what: str, *, nonneg_message: str
) -> tuple[Column, list[tuple[Column, Column]]]:
    n = V.as_whole_number(a.value, a.k)
    checks = [
        (
            ~a.kind_in(K.NUMERIC_TYPES),
            message(f"{op}: {what} must be a numeric type (is BSON type ", kind_text(a), ")"),
        ),
        (
            n.isNull() | (n < K.INT32_MIN) | (n > K.INT32_MAX),
            message(
                f"{op}: {what} cannot be represented as a 32-bit integral value: ",
                number_text(V.as_double(a.value, a.k)),
            ),
        ),
        (n < 0, F.lit(nonneg_message)),
    ]
    return n, checks


def substr_cp(ctx: Ctx) -> Expr:
    """`$substrCP`: `[string, start, length]` in code points."""
    args = _args(ctx, 3, 3)
    if args is None:
        return placeholder()
    text, coerce_error = coerce_to_string(args[0])
    start, start_checks = _index_checks(
        ctx.op,
        args[1],
        "starting index",
        nonneg_message=f"{ctx.op}: the starting index must be nonnegative integer.",
    )
    length, length_checks = _index_checks(
        ctx.op, args[2], "length", nonneg_message=f"{ctx.op}: length must be a nonnegative integer."
    )
    # MongoDB checks types of both before the signs: reorder to match.
    checks = (
        [(F.lit(False), _no_error())]
        + start_checks[:2]
        + length_checks[:2]
        + [length_checks[2], start_checks[2]]
    )
    own = F.coalesce(coerce_error, when_all(checks))
    value = F.substr(text, (start + 1).cast("int"), length.cast("int"))
    return result(V.from_string(value), *errors_of(args), own=own, kinds={"string"})


def substr_bytes(ctx: Ctx) -> Expr:
    """`$substrBytes` / `$substr`: `[string, start, length]` in UTF-8 bytes."""
    args = _args(ctx, 3, 3)
    if args is None:
        return placeholder()
    text, coerce_error = coerce_to_string(args[0])
    start, length = (V.as_whole_number(a.value, a.k) for a in args[1:])
    raw = F.encode(text, "UTF-8")
    size = F.octet_length(text)
    length = F.when(length < 0, size).otherwise(length)

    def continuation(index: Column) -> Column:
        byte = F.hex(F.substr(raw, (index + 1).cast("int"), F.lit(1)))
        return (index >= 0) & (index < size) & (byte >= F.lit("80")) & (byte <= F.lit("BF"))

    op = ctx.op if ctx.op == "$substrBytes" else "$substrBytes"
    checks = [
        (
            ~args[1].kind_in(("int", "long", "double")),
            message(
                f"{op}:  starting index must be a numeric type (is BSON type ",
                kind_text(args[1]),
                ")",
            ),
        ),
        (
            ~args[2].kind_in(("int", "long", "double")),
            message(
                f"{op}:  length must be a numeric type (is BSON type ", kind_text(args[2]), ")"
            ),
        ),
        (
            start < 0,
            message(
                f"{op}:  starting index must be non-negative (got: ", start.cast("string"), ")"
            ),
        ),
        (
            continuation(start),
            F.lit(f"{op}:  Invalid range, starting index is a UTF-8 continuation byte."),
        ),
        (
            continuation(start + length),
            F.lit(f"{op}:  Invalid range, ending index is in the middle of a UTF-8 character."),
        ),
    ]
    own = F.coalesce(coerce_error, when_all(checks))
    piece = F.try_validate_utf8(
        F.substr(raw, (start + 1).cast("int"), length.cast("int")).cast("string")
    )
    value = F.when(start >= size, F.lit("")).otherwise(piece)
    return result(V.from_string(value), *errors_of(args), own=own, kinds={"string"})


def _str_len(ctx: Ctx) -> Expr:
    args = _args(ctx, 1, 1)
    if args is None:
        return placeholder()
    a = args[0]
    own = F.when(
        ~a.kind_in(("string",)),
        message(f"{ctx.op} requires a string argument, found: ", kind_text(a)),
    )
    text = V.as_string(a.value, a.k)
    length = F.char_length(text) if ctx.op == "$strLenCP" else F.octet_length(text)
    return result(V.from_long(length), a.error, own=own, kinds={"int"})


def _trim(ctx: Ctx) -> Expr:
    spec = named(ctx, ("input",), ("chars",), what="argument")
    if spec is None:
        return placeholder()
    inp = ctx.arg(ctx.sub(spec["input"], "input"))
    chars = ctx.arg(ctx.sub(spec["chars"], "chars")) if "chars" in spec else None
    set_text = V.as_string(chars.value, chars.k) if chars is not None else F.lit(WHITESPACE)
    text = V.as_string(inp.value, inp.k)
    trimmed = {"$trim": F.trim, "$ltrim": F.ltrim, "$rtrim": F.rtrim}[ctx.op](text, set_text)
    checks = [
        (inp.nullish, _no_error()),
        (
            ~inp.kind_in(("string",)),
            message(
                f"{ctx.op} requires its input to be a string, got ",
                F.to_json(inp.value),
                " (of type ",
                kind_text(inp),
                ") instead.",
            ),
        ),
    ]
    nullish = inp.nullish
    if chars is not None:
        checks.append((chars.nullish, _no_error()))
        checks.append(
            (
                ~chars.kind_in(("string",)),
                message(
                    f"{ctx.op} requires 'chars' to be a string, got ",
                    F.to_json(chars.value),
                    " (of type ",
                    kind_text(chars),
                    ") instead.",
                ),
            )
        )
        nullish = nullish | chars.nullish
    value = F.when(nullish, V.null()).otherwise(V.from_string(trimmed))
    errors = [inp.error] + ([chars.error] if chars is not None else [])
    return result(value, *errors, own=when_all(checks), kinds={"string", "null"})


def _quote(delimiter: Column) -> Column:
    """A Java regex matching `delimiter` literally."""
    escaped = F.replace(delimiter, F.lit("\\E"), F.lit("\\E\\\\E\\Q"))
    return F.concat(F.lit("\\Q"), escaped, F.lit("\\E"))


def split(ctx: Ctx) -> Expr:
    """`$split`: `[string, delimiter]` into an array of strings."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    text, sep = args
    sep_text = V.as_string(sep.value, sep.k)
    checks = [
        (text.nullish | sep.nullish, _no_error()),
        (
            ~text.kind_in(("string",)),
            message(
                "$split requires an expression that evaluates to a string as a first argument, found: ",
                kind_text(text),
            ),
        ),
        (
            ~sep.kind_in(("string",)),
            message(
                "$split requires an expression that evaluates to a string as a second argument, found: ",
                kind_text(sep),
            ),
        ),
        (sep_text == "", F.lit("$split requires a non-empty separator")),
    ]
    parts = F.split(V.as_string(text.value, text.k), _quote(sep_text), -1)
    value = null_if_nullish(args, V.from_array(parts))
    return result(value, text.error, sep.error, own=when_all(checks), kinds={"array", "null"})


def strcasecmp(ctx: Ctx) -> Expr:
    """`$strcasecmp`: case-insensitive (ASCII) comparison, -1/0/1."""
    args = _args(ctx, 2, 2)
    if args is None:
        return placeholder()
    (left, lerr), (right, rerr) = (coerce_to_string(a) for a in args)
    lu, ru = F.translate(left, _LOWER, _UPPER), F.translate(right, _LOWER, _UPPER)
    value = F.when(lu < ru, F.lit(-1)).when(lu > ru, F.lit(1)).otherwise(F.lit(0))
    return result(V.from_long(value), *errors_of(args), own=F.coalesce(lerr, rerr), kinds={"int"})


def index_of_cp(ctx: Ctx) -> Expr:
    """`$indexOfCP`: `[string, substring, start?, end?]`, -1 when absent."""
    args = _args(ctx, 2, 4)
    if args is None:
        return placeholder()
    text, token = args[0], args[1]
    s, t = V.as_string(text.value, text.k), V.as_string(token.value, token.k)
    checks = [
        (text.nullish, _no_error()),
        (
            ~text.kind_in(("string",)),
            message("$indexOfCP requires a string as the first argument, found: ", kind_text(text)),
        ),
        (
            ~token.kind_in(("string",)),
            message(
                "$indexOfCP requires a string as the second argument, found: ", kind_text(token)
            ),
        ),
    ]
    bounds = []
    for a, what in zip(args[2:], ("starting index", "ending index"), strict=False):
        n = V.as_whole_number(a.value, a.k)
        checks.append(
            (
                ~a.kind_in(K.NUMERIC_TYPES) | n.isNull(),
                message(
                    f"$indexOfCPrequires an integral {what}, found a value of type: ",
                    kind_text(a),
                    ", with value: ",
                    F.to_json(a.value),
                ),
            )
        )
        checks.append(
            (
                n < 0,
                message(f"$indexOfCP requires a nonnegative {what}, found: ", F.to_json(a.value)),
            )
        )
        bounds.append(n)
    start = bounds[0] if bounds else F.lit(0).cast("bigint")
    length = F.char_length(s)
    end = F.least(bounds[1], length) if len(bounds) > 1 else length
    window = F.substr(s, F.lit(1), end.cast("int"))
    found = F.call_function("locate", t, window, (start + 1).cast("int")) - 1
    empty_token = F.when(start <= end, start).otherwise(F.lit(-1))
    index = when_all([(start > length, F.lit(-1)), (t == "", empty_token)], found)
    value = F.when(text.nullish, V.null()).otherwise(V.from_long(index))
    return result(value, *errors_of(args), own=when_all(checks), kinds={"int", "null"})


def _replace(ctx: Ctx) -> Expr:
    spec = named(ctx, ("input", "find", "replacement"), what="argument")
    if spec is None:
        return placeholder()
    parts = {k: ctx.arg(ctx.sub(spec[k], k)) for k in ("input", "find", "replacement")}
    checks = []
    for key, a in parts.items():
        checks.append(
            (
                ~a.kind_in(("string", "null", "missing")),
                message(f"{ctx.op} requires that '{key}' be a string, found: ", F.to_json(a.value)),
            )
        )
    s, f, r = (V.as_string(a.value, a.k) for a in parts.values())
    if ctx.op == "$replaceAll":
        replaced = F.replace(s, f, r)
    else:
        at = F.call_function("locate", f, s, F.lit(1))
        rest = F.substr(s, at + F.char_length(f))
        replaced = F.when(at == 0, s).otherwise(F.concat(F.substr(s, F.lit(1), at - 1), r, rest))
    value = null_if_nullish(list(parts.values()), V.from_string(replaced))
    return result(value, *errors_of(parts.values()), own=when_all(checks), kinds={"string", "null"})


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$concat": concat,
    "$toLower": _case(upper=False),
    "$toUpper": _case(upper=True),
    "$substrCP": substr_cp,
    "$substrBytes": substr_bytes,
    "$substr": substr_bytes,
    "$strLenCP": _str_len,
    "$strLenBytes": _str_len,
    "$trim": _trim,
    "$ltrim": _trim,
    "$rtrim": _trim,
    "$split": split,
    "$strcasecmp": strcasecmp,
    "$indexOfCP": index_of_cp,
    "$replaceOne": _replace,
    "$replaceAll": _replace,
}
