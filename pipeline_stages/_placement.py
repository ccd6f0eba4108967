"""Where stages may stand in a pipeline (atlas-semantics.md §2): ends, counts, main vs window.

The registry describes the stages' roles (`StageRoles`) and passes them in, so these rules
need nothing from the registry module itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pipeline_stages._base import Problem, ProblemCode, join_path
from pipeline_stages._windowing.stage_fields import inner_pipeline_problems


@dataclass(frozen=True)
class StageRoles:
    """The stage keys by role, as the registry knows them."""

    known: frozenset[str]
    source: str
    sinks: frozenset[str]
    windows: frozenset[str]
    #: Stages only allowed inside a window's inner pipeline.
    main_only_excluded: frozenset[str]
    in_window: frozenset[str]


def single_key(value: Any) -> str | None:
    """The stage name of a stage object, or None unless it has exactly one key."""
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        return key if isinstance(key, str) else None
    return None


def _misplaced(path: str, message: str) -> Problem:
    return Problem(ProblemCode.MISPLACED_STAGE.value, path, message)


def _known_keys(raw: list[Any], roles: StageRoles) -> list[str | None]:
    return [key if (key := single_key(item)) in roles.known else None for item in raw]


def _check_ends(keys: list[str | None], path: str, roles: StageRoles) -> Iterator[Problem]:
    sources = [i for i, k in enumerate(keys) if k == roles.source]
    if not sources and keys[0] is not None:
        yield Problem(
            "missing", path, f"A pipeline must start with a $source stage, got {keys[0]} first"
        )
    for i in sources:
        if i > 0:
            first = (
                "Only one $source stage is allowed in a pipeline."
                if keys[0] == roles.source
                else ("$source must be the first stage of the pipeline")
            )
            yield _misplaced(join_path(path, i), first)
    sinks = [i for i, k in enumerate(keys) if k in roles.sinks]
    for n, i in enumerate(sinks):
        if n > 0:
            yield _misplaced(
                join_path(path, i),
                "Only one sink stage ($merge or $emit) is allowed in a pipeline.",
            )
        elif i != len(keys) - 1:
            yield _misplaced(
                join_path(path, i), f"{keys[i]} must be the last stage of the pipeline"
            )
    for i in [i for i, k in enumerate(keys) if k in roles.windows][1:]:
        yield _misplaced(join_path(path, i), "Only one window stage is allowed in a pipeline.")


def check_placement(raw: list[Any], path: str, roles: StageRoles) -> list[Problem]:
    """Problems with where stages are (main vs window pipeline, ends, counts)."""
    keys = _known_keys(raw, roles)
    problems = list(_check_ends(keys, path, roles))
    for i, key in enumerate(keys):
        if key is not None and key in roles.main_only_excluded:
            problems.append(
                _misplaced(
                    join_path(path, i),
                    f"{key} stage is only permitted in the inner pipeline of a window stage",
                )
            )
        body = raw[i][key] if key is not None and key in roles.windows else None
        if key is not None and isinstance(body, dict) and isinstance(body.get("pipeline"), list):
            inner_path = join_path(path, i, key, "pipeline")
            problems.extend(
                inner_pipeline_problems(
                    _known_keys(body["pipeline"], roles), inner_path, allowed=roles.in_window
                )
            )
    return problems
