"""`$regexMatch`: PCRE options `i m s x` become Java inline flags.

Patterns run on Java's regex engine, which agrees with PCRE on common syntax. A constant
pattern is compiled at compile time (a bad one is an `invalid_arguments` problem); a pattern
computed per document is checked with `try_reflect` before use, because Spark would fail the
whole query on an invalid one.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from pipeline_stages._mql import values as V
from pipeline_stages._mql.ops.common import (
    Arg,
    Ctx,
    named,
    placeholder,
    result,
    when_all,
)
from pipeline_stages._mql.ops.messages import message
from pipeline_stages._mql.scope import Expr

_FLAGS = {"i": "i", "m": "m", "s": "s", "x": "x"}


def _regex_flags(ctx: Ctx, options: Arg | None) -> tuple[Column, str | None, Column | None]:
    """Java inline flags for the options (column, and text when constant), plus an error."""
    if options is None:
        return F.lit(""), "", None
    if options.is_const:
        text = options.const if options.const is not None else ""
        if not isinstance(text, str):
            ctx.fail(f"{ctx.op} needs 'options' to be of type string", "options")
            return F.lit(""), "", None
        bad = [c for c in text if c not in _FLAGS and c != "u"]
        if bad:
            ctx.fail(f"{ctx.op} invalid flag in regex options: {bad[0]}", "options")
        letters = "".join(dict.fromkeys(_FLAGS[c] for c in text if c in _FLAGS))
        prefix = f"(?{letters})" if letters else ""
        return F.lit(prefix), prefix, None
    raw = F.coalesce(V.as_string(options.value, options.k), F.lit(""))
    keep = F.regexp_replace(raw, "[^imsx]", "")
    flags = F.when(keep == "", F.lit("")).otherwise(F.concat(F.lit("(?"), keep, F.lit(")")))
    unknown = F.regexp_replace(raw, "[imsxu]", "")
    error = when_all(
        [
            (
                ~options.kind_in(("string", "null", "missing")),
                F.lit(f"{ctx.op} needs 'options' to be of type string"),
            ),
            (
                unknown != "",
                message(
                    f"{ctx.op} invalid flag in regex options: ",
                    F.substr(unknown, F.lit(1), F.lit(1)),
                ),
            ),
        ]
    )
    return flags, None, error


def _constant_pattern_ok(ctx: Ctx, pattern: str) -> bool:
    """Compile a constant pattern with Java's engine now, so a bad one is a compile error."""
    session = SparkSession.getActiveSession()
    if session is None:
        return True
    try:
        session._jvm.java.util.regex.Pattern.compile(pattern)  # type: ignore[union-attr]
    except Exception as exc:  # noqa: BLE001 - py4j wraps the Java exception
        reason = str(exc).split("\n")[0]
        ctx.fail(f"Invalid Regex in {ctx.op}: {reason}", "regex")
        return False
    return True


def _regex_test(
    ctx: Ctx, text: Column, regex: Arg, flags: Column, flag_text: str | None
) -> tuple[Column, Column]:
    """(matched, pattern_is_valid) for a constant or per-document pattern."""
    if regex.is_const and isinstance(regex.const, str) and flag_text is not None:
        if not _constant_pattern_ok(ctx, flag_text + regex.const):
            return F.lit(False), F.lit(True)
        return text.rlike(flag_text + regex.const), F.lit(True)
    # A per-document pattern is compiled per row: guard it, as a bad one would fail the query.
    pattern = F.concat(flags, V.as_string(regex.value, regex.k))
    valid = F.call_function(
        "try_reflect", F.lit("java.util.regex.Pattern"), F.lit("compile"), pattern
    ).isNotNull()
    return F.when(valid, F.regexp_like(text, pattern)), valid


def regex_match(ctx: Ctx) -> Expr:
    """`$regexMatch`: true when `regex` matches somewhere in `input`."""
    spec = named(ctx, ("input", "regex"), ("options",), what="argument")
    if spec is None:
        return placeholder()
    inp = ctx.arg(ctx.sub(spec["input"], "input"))
    regex = ctx.arg(ctx.sub(spec["regex"], "regex"))
    options = ctx.arg(ctx.sub(spec["options"], "options")) if "options" in spec else None
    flags, flag_text, flag_error = _regex_flags(ctx, options)
    matched, valid = _regex_test(ctx, V.as_string(inp.value, inp.k), regex, flags, flag_text)
    checks = [
        (
            ~inp.kind_in(("string", "null", "missing")),
            F.lit(f"{ctx.op} needs 'input' to be of type string"),
        ),
        (
            ~regex.kind_in(("string", "null", "missing")),
            F.lit(f"{ctx.op} needs 'regex' to be of type string or regex"),
        ),
    ]
    if flag_error is not None:
        checks.append((flag_error.isNotNull(), flag_error))
    checks.append((~inp.nullish & ~regex.nullish & ~valid, F.lit(f"Invalid Regex in {ctx.op}")))
    value = F.when(inp.nullish | regex.nullish, F.lit(False)).otherwise(
        F.coalesce(matched, F.lit(False))
    )
    errors = [inp.error, regex.error] + ([options.error] if options is not None else [])
    return result(V.from_bool(value), *errors, own=when_all(checks), kinds={"bool"})


OPS: dict[str, Callable[[Ctx], Expr]] = {
    "$regexMatch": regex_match,
}
