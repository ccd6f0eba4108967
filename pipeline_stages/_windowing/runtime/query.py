"""A `$match` filter evaluated in Python on a window's results (issue 25).

With `trigger`, a `$match` right after the window's `$group`/`$sort` decides whether a pane
emits anything, and a pane that emits nothing must not be fired nor take an index; so the
operator runs it with the other blocking stages (`blocking.run_later`) instead of Spark
running it after the operator. Results are few (one per group and pane), so this evaluates
the filter document directly, with MongoDB's query semantics for the operators it knows:

* `{path: value}` and `$eq`: some value at `path` equals `value` (numbers by value across
  types; an array at the path matches as a whole or by any element); `null` also matches a
  missing field;
* `$ne`, `$nin`: the negations of `$eq`, `$in`;
* `$gt`, `$gte`, `$lt`, `$lte`: some value at the path of the same BSON type bracket as the
  operand compares so (a `null` operand: `$gte`/`$lte` match null or missing);
* `$in`: some value equals some element; `$exists`; `$not` over an operator object;
* `$and`, `$or`, `$nor` over filter lists.

Anything else (`$regex`, `$elemMatch`, `$expr`, `$type`, ...) is not evaluated here:
`unsupported` names it, and the compile refuses that `$match` with `trigger` as before.
Dotted paths walk objects and, through arrays, each element (a numeric part also indexes
the array), as MongoDB queries do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipeline_stages._documents.ejson import from_relaxed_ejson
from pipeline_stages._documents.values import MISSING, is_nullish, mql_type, sort_key, truthy

_COMPARE = frozenset({"$gt", "$gte", "$lt", "$lte"})
_FIELD_OPERATORS = _COMPARE | {"$eq", "$ne", "$in", "$nin", "$exists", "$not"}
_LOGICAL = frozenset({"$and", "$or", "$nor"})


def unsupported(raw: Any) -> str | None:
    """Why `raw` cannot be evaluated here (the first operator it does not know), or None."""
    if not isinstance(raw, Mapping):
        return "a filter must be an object"
    for key, value in raw.items():
        if key in _LOGICAL:
            if not isinstance(value, list) or not value:
                return f"{key} takes a non-empty array of filters"
            for item in value:
                if problem := unsupported(item):
                    return problem
        elif key.startswith("$"):
            return key
        elif _is_operator_object(value):
            if problem := _condition_unsupported(value):
                return problem
    return None


def _condition_unsupported(condition: Mapping[str, Any]) -> str | None:
    for op, operand in condition.items():
        if op not in _FIELD_OPERATORS:
            return op
        if op in ("$in", "$nin") and not isinstance(operand, list):
            return f"{op} takes an array"
        if op in ("$in", "$nin") and any(_is_regex(v) for v in operand):
            return f"a regular expression in {op}"
        if op == "$not" and not _is_operator_object(operand):
            return "$not takes an operator object"
        if op == "$not" and (problem := _condition_unsupported(operand)):
            return problem
    return None


def _is_regex(value: Any) -> bool:
    return isinstance(value, Mapping) and ("$regex" in value or "$regularExpression" in value)


def _is_operator_object(value: Any) -> bool:
    return isinstance(value, Mapping) and bool(value) and all(k.startswith("$") for k in value)


def matches(raw: Mapping[str, Any], doc: Any) -> bool:
    """Whether `doc` satisfies the filter `raw` (one `unsupported` accepts)."""
    for key, value in raw.items():
        if key == "$and":
            ok = all(matches(item, doc) for item in value)
        elif key == "$or":
            ok = any(matches(item, doc) for item in value)
        elif key == "$nor":
            ok = not any(matches(item, doc) for item in value)
        else:
            ok = _field_matches(_candidates(doc, key.split(".")), value)
        if not ok:
            return False
    return True


#: One value at a path, and whether a condition also tests its elements when it is an array
#: (not for an array element reached by a numeric path part, as in MongoDB).
Candidate = tuple[Any, bool]


def _field_matches(candidates: list[Candidate], condition: Any) -> bool:
    if not _is_operator_object(condition):
        return _equals(candidates, from_relaxed_ejson(condition))
    return all(_operator(candidates, op, operand) for op, operand in condition.items())


def _operator(candidates: list[Candidate], op: str, operand: Any) -> bool:
    if op == "$not":
        return not _field_matches(candidates, operand)
    if op == "$exists":
        present = any(value is not MISSING for value, _ in candidates)
        return present == truthy(operand)
    if op in ("$in", "$nin"):
        found = any(_equals(candidates, from_relaxed_ejson(v)) for v in operand)
        return found if op == "$in" else not found
    value = from_relaxed_ejson(operand)
    if op == "$eq":
        return _equals(candidates, value)
    if op == "$ne":
        return not _equals(candidates, value)
    return _compares(candidates, op, value)


def _tested(candidates: list[Candidate]) -> list[Any]:
    """The values a condition tests: each candidate, and each element of an array one."""
    out: list[Any] = []
    for value, expand in candidates:
        out.append(value)
        if expand and isinstance(value, list):
            out.extend(value)
    return out


def _equals(candidates: list[Candidate], value: Any) -> bool:
    tested = _tested(candidates)
    if value is None:  # null matches null and a missing field
        return any(is_nullish(v) for v in tested)
    key = sort_key(value)
    return any(v is not MISSING and sort_key(v) == key for v in tested)


def _compares(candidates: list[Candidate], op: str, value: Any) -> bool:
    if value is None:  # only null (or missing) is "equal" to null; nothing is below/above it
        return op in ("$gte", "$lte") and _equals(candidates, None)
    key = sort_key(value)
    for candidate in _tested(candidates):
        if is_nullish(candidate) or mql_type(candidate) == "array":
            continue
        other = sort_key(candidate)
        if other[0] != key[0]:  # another BSON type bracket never compares
            continue
        if (
            (op == "$gt" and other > key)
            or (op == "$gte" and other >= key)
            or (op == "$lt" and other < key)
            or (op == "$lte" and other <= key)
        ):
            return True
    return False


def _candidates(value: Any, parts: list[str], *, expand: bool = True) -> list[Candidate]:
    """The values at a dotted path, MongoDB's way: a path through a scalar or a missing field
    is missing (MISSING, which `null` matches); through an array, each object element
    continues the path (other elements give nothing) and a numeric part also indexes it."""
    if not parts:
        return [(value, expand)]
    head, rest = parts[0], parts[1:]
    if isinstance(value, Mapping):
        return _candidates(value.get(head, MISSING), rest)
    if not isinstance(value, list):
        return [(MISSING, False)]
    out: list[Candidate] = []
    if head.isdigit() and int(head) < len(value):
        out += _candidates(value[int(head)], rest, expand=False)
    for element in value:
        if isinstance(element, Mapping):
            out += _candidates(element, parts)
    return out


__all__ = ["matches", "unsupported"]
