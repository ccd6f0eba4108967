"""Pipeline stages for the reference executor: stateless ones per document, blocking ones
(`$group`, `$sort`, `$limit`, `$count`) per window.

Per-document stage errors are raised as `StageError(operator_name, doc, message)` so the
caller can write the DLQ record Atlas writes (`"Failed to process input document in <Op>
with error: <message>"`, atlas-semantics.md §3.3).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from pipeline_stages._documents.values import (
    MISSING,
    TYPE_RANK,
    MqlError,
    compare,
    get_path,
    mql_type,
    repr_for_error,
    set_path,
    sort_key,
    truthy,
    unset_path,
    values_equal,
)
from pipeline_stages._windowing.accumulators import GroupSpec, parse_group
from pipeline_stages._windowing.accumulators.ordered import parse_sort_spec, sort_value_key
from tests.conformance.mini_mql import Scope, evaluate

#: Atlas operator names (DLQ `operatorName`) of the stages the reference executor runs.
OPERATOR_NAMES: dict[str, str] = {
    "$match": "MatchOperator",
    "$project": "ProjectOperator",
    "$unset": "ProjectOperator",
    "$addFields": "AddFieldsOperator",
    "$set": "AddFieldsOperator",
    "$replaceRoot": "ReplaceRootOperator",
    "$replaceWith": "ReplaceRootOperator",
    "$group": "GroupOperator",
    "$count": "GroupOperator",
    "$sort": "SortOperator",
    "$limit": "LimitOperator",
}

BLOCKING = frozenset({"$group", "$sort", "$limit", "$count"})


class StageError(Exception):
    """A document failed in a stage; it goes to the DLQ."""

    def __init__(self, operator: str, doc: Mapping[str, Any], message: str) -> None:
        super().__init__(message)
        self.operator = operator
        self.doc = doc
        self.reason = f"Failed to process input document in {operator} with error: {message}"


def stage_key(stage: Mapping[str, Any]) -> str:
    """The single `$`-key of a stage object."""
    (key,) = stage
    return key


# --------------------------------------------------------------------------- stateless


def apply_stateless(
    stage: Mapping[str, Any], doc: dict[str, Any], meta: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Run one stateless stage on one document: zero or one output documents.

    Raises:
        StageError: the expression failed for this document.
    """
    key = stage_key(stage)
    body = stage[key]
    handler = _STATELESS.get(key)
    if handler is None:
        raise NotImplementedError(f"reference executor does not run {key}")
    try:
        return handler(body, doc, Scope(doc, meta))
    except MqlError as exc:
        raise StageError(OPERATOR_NAMES[key], doc, str(exc)) from None


def _add_fields(body: Mapping[str, Any], doc: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
    out = copy.deepcopy(doc)
    for path, expr in body.items():
        set_path(out, path, evaluate(expr, scope))
    return [out]


def _project(body: Mapping[str, Any], doc: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
    flags = {
        k: v for k, v in body.items() if isinstance(v, bool | int) and not isinstance(v, float)
    }
    exclusion = all(not v for k, v in flags.items()) and len(flags) == len(body)
    if exclusion:
        out = copy.deepcopy(doc)
        for path in body:
            unset_path(out, path)
        return [out]
    out: dict[str, Any] = {}
    if body.get("_id", 1) and "_id" in doc:
        out["_id"] = copy.deepcopy(doc["_id"])
    for path, spec in body.items():
        if path == "_id" and spec in (0, 1, True, False):
            continue
        value = get_path(doc, path) if spec is True or spec == 1 else evaluate(spec, scope)
        if value is not MISSING:
            set_path(out, path, copy.deepcopy(value))
    return [out]


def _unset(body: Any, doc: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
    out = copy.deepcopy(doc)
    for path in [body] if isinstance(body, str) else body:
        unset_path(out, path)
    return [out]


def _replace_root(new_root: Any, doc: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
    value = evaluate(new_root, scope)
    if not isinstance(value, dict):
        raise MqlError(
            "'replacement document' must evaluate to an object, but resulting value was: "
            f"{repr_for_error(value)}. Type of resulting value: '{mql_type(value)}'"
        )
    return [copy.deepcopy(value)]


def _match(body: Mapping[str, Any], doc: dict[str, Any], scope: Scope) -> list[dict[str, Any]]:
    return [doc] if matches(body, doc, scope) else []


_STATELESS = {
    "$addFields": _add_fields,
    "$set": _add_fields,
    "$project": _project,
    "$unset": _unset,
    "$replaceRoot": lambda body, doc, scope: _replace_root(body["newRoot"], doc, scope),
    "$replaceWith": _replace_root,
    "$match": _match,
}


# --------------------------------------------------------------------------- $match


def matches(query: Mapping[str, Any], doc: Mapping[str, Any], scope: Scope) -> bool:
    """A small query-language subset: equality, comparison operators, `$in`, `$nin`,
    `$exists`, `$and`/`$or`/`$nor` and `$expr`."""
    for key, cond in query.items():
        if key == "$and" and not all(matches(q, doc, scope) for q in cond):
            return False
        if key == "$or" and not any(matches(q, doc, scope) for q in cond):
            return False
        if key == "$nor" and any(matches(q, doc, scope) for q in cond):
            return False
        if key == "$expr":
            if not truthy(evaluate(cond, scope)):
                return False
        if not key.startswith("$") and not _field_matches(get_path(doc, key), cond):
            return False
    return True


def _field_matches(value: Any, cond: Any) -> bool:
    if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
        return all(_operator_matches(value, op, arg) for op, arg in cond.items())
    return _operator_matches(value, "$eq", cond)


def _candidates(value: Any) -> list[Any]:
    return [value, *value] if isinstance(value, list) else [value]


def _same_bracket(left: Any, right: Any) -> bool:
    return TYPE_RANK[mql_type(left)] == TYPE_RANK[mql_type(right)]


def _operator_matches(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return any(values_equal(v, arg) for v in _candidates(value))
    if op == "$ne":
        return not _operator_matches(value, "$eq", arg)
    if op == "$in":
        return any(_operator_matches(value, "$eq", a) for a in arg)
    if op == "$nin":
        return not _operator_matches(value, "$in", arg)
    if op == "$exists":
        return (value is not MISSING) == bool(arg)
    tests = {
        "$gt": lambda c: c > 0,
        "$gte": lambda c: c >= 0,
        "$lt": lambda c: c < 0,
        "$lte": lambda c: c <= 0,
    }
    if op in tests:
        return any(_same_bracket(v, arg) and tests[op](compare(v, arg)) for v in _candidates(value))
    raise NotImplementedError(f"reference executor does not support query operator {op}")


# --------------------------------------------------------------------------- blocking


def sort_docs(spec: Mapping[str, Any], docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`$sort`: stable, so equal keys keep arrival order."""
    fields = parse_sort_spec(dict(spec))
    result = list(docs)
    for name, direction in reversed(fields):
        result.sort(
            key=lambda d, n=name, r=direction: sort_value_key(get_path(d, n), r),
            reverse=direction < 0,
        )
    return result


def prepare_group(
    group: GroupSpec, doc: dict[str, Any], meta: Mapping[str, Any]
) -> tuple[Any, list[Any]]:
    """Evaluate a document's group key and accumulator arguments (DLQ'd on error).

    Raises:
        StageError: the `_id` or an argument failed, or an accumulator rejects its input.
    """
    scope = Scope(doc, meta)
    try:
        key = evaluate(group.id_expr, scope)
        values = [
            MISSING if acc.input_expr is MISSING else evaluate(acc.input_expr, scope)
            for _, acc in group.fields
        ]
        for (_, acc), value in zip(group.fields, values, strict=True):
            acc.validate(value)
    except MqlError as exc:
        raise StageError("GroupOperator", doc, str(exc)) from None
    return (None if key is MISSING else key), values


def run_group(
    group: GroupSpec, prepared: list[tuple[int, dict[str, Any], Any, list[Any]]]
) -> list[dict[str, Any]]:
    """Fold prepared `(order, doc, key, values)` tuples into one output document per key."""
    states: dict[Any, tuple[Any, list[Any]]] = {}
    for order, doc, key, values in prepared:
        k = sort_key(key)
        if k not in states:
            states[k] = (key, [acc.init() for _, acc in group.fields])
        accs = states[k][1]
        for i, ((_, acc), value) in enumerate(zip(group.fields, values, strict=True)):
            accs[i] = acc.add(accs[i], value, order=order, doc=doc)
    return [
        {
            "_id": key,
            **{name: acc.finalize(s) for (name, acc), s in zip(group.fields, accs, strict=True)},
        }
        for key, accs in states.values()
    ]


def parse_group_stage(stage: Mapping[str, Any]) -> GroupSpec:
    """The `GroupSpec` of a `{$group: ...}` or `{$count: "name"}` stage."""
    if "$count" in stage:
        return parse_group({"_id": None, stage["$count"]: {"$sum": 1}})
    return parse_group(stage["$group"])
