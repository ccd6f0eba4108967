"""`$match`: keep the documents that satisfy a query filter.

The body is a MongoDB query filter, kept as raw JSON (key order and int/double kept) and
compiled by the filter translator. `$where`, `$near`, `$nearSphere` and `$text` are refused
with `unsupported_option`: MongoDB does not allow them in an aggregation `$match` (`$text`
only as the first stage of a collection query) and a stream has no text or geo index.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pipeline_stages._base import BodySpec, ProblemCode, describe, join_path
from pipeline_stages._problems import ErrorList, Loc

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$match"
OPERATOR_NAME = "MatchOperator"

#: Query operators a stream filter cannot use.
FORBIDDEN_QUERY_OPERATORS = frozenset({"$where", "$near", "$nearSphere", "$text"})


def find_operators(value: Any, names: frozenset[str], loc: Loc = ()) -> Iterator[tuple[Loc, str]]:
    """Yield `(loc, name)` for each key of `names` anywhere in a raw filter."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in names:
                yield (*loc, key), key
            else:
                yield from find_operators(item, names, (*loc, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from find_operators(item, names, (*loc, index))


def filter_errors(value: Any, errors: ErrorList, *, what: str) -> None:
    """Record errors for a filter that is not an object or uses a forbidden operator."""
    if not isinstance(value, dict):
        errors.add(
            (), "dict_type", f"{what} must be a query filter object, got {describe(value)}", value
        )
        return
    for loc, name in find_operators(value, FORBIDDEN_QUERY_OPERATORS):
        errors.add(
            loc,
            ProblemCode.UNSUPPORTED_OPTION,
            f"{name} is not allowed in a stream filter (Atlas forbids $where, $near, "
            "$nearSphere and $text)",
            value,
        )


class MatchSpec(BodySpec):
    """The body of `$match`: a raw query filter."""

    filter: dict[str, Any]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        filter_errors(raw, errors, what="$match")
        errors.raise_if_any(cls.__name__)
        return {"filter": raw}


def compile(spec: MatchSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Keep healthy documents matching the filter; evaluation errors go to the DLQ."""
    from pipeline_stages._mql.query.compile import compile_filter

    scope = frame.scope()
    predicate = compile_filter(spec.filter, scope, join_path(path, KEY), ctx.problems)
    prepared = frame.prepared(scope)
    matched = prepared.where(predicate, operator=OPERATOR_NAME, keep_ticks=ctx.window_ahead)
    return matched.finished(scope)
