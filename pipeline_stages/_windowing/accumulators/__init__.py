"""`$group` accumulators: the operator table, `make_accumulator` and `parse_group`.

The contract every accumulator follows is in `base`; the families are `simple`, `collect`,
`numeric` and `ordered`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline_stages._windowing.accumulators import collect, numeric, ordered
from pipeline_stages._windowing.accumulators.base import Accumulator
from pipeline_stages._windowing.accumulators.simple import Count, First, Last, Max, Min

__all__ = ["Accumulator", "GroupSpec", "accumulator_ops", "make_accumulator", "parse_group"]


def _registry() -> dict[str, type[Accumulator]]:
    classes: list[type[Accumulator]] = [
        Count,
        Min,
        Max,
        First,
        Last,
        *collect.CLASSES,
        *numeric.CLASSES,
        *ordered.CLASSES,
    ]
    return {cls.op: cls for cls in classes}


def accumulator_ops() -> frozenset[str]:
    """Every supported accumulator operator name."""
    return frozenset(_registry())


def make_accumulator(op: str, spec: Any) -> Accumulator:
    """Build the accumulator for `{op: spec}`.

    Raises:
        ValueError: unknown operator or invalid static parameters (`n`, `sortBy`, `p`, ...),
            with MongoDB's wording where it has one.
    """
    cls = _registry().get(op)
    if cls is None:
        raise ValueError(f"Unknown group operator '{op}'")
    return cls(spec)


@dataclass(frozen=True)
class GroupSpec:
    """A parsed `$group` body: the `_id` expression and the output fields in order."""

    id_expr: Any
    fields: tuple[tuple[str, Accumulator], ...]


def parse_group(spec: Mapping[str, Any]) -> GroupSpec:
    """Parse `{_id: <expr>, <field>: {<$acc>: <arg>}, ...}`.

    Raises:
        ValueError: missing `_id`, a dotted field name, or a field that is not a single
            accumulator object.
    """
    if "_id" not in spec:
        raise ValueError("a group specification must include an _id")
    fields = []
    for name, body in spec.items():
        if name == "_id":
            continue
        if "." in name:
            raise ValueError(f"the group aggregate field name '{name}' cannot contain '.'")
        if not isinstance(body, dict) or len(body) != 1:
            raise ValueError(
                f"the group aggregate field '{name}' must be defined as an expression inside an object"
            )
        ((op, arg),) = body.items()
        fields.append((name, make_accumulator(op, arg)))
    return GroupSpec(id_expr=spec["_id"], fields=tuple(fields))
