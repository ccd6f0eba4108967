"""`$project`: reshape documents by including, excluding or computing fields.

The body maps field paths to `1`/`true` (include), `0`/`false` (exclude), a nested
sub-projection object, or an MQL expression (computed field, which counts as an inclusion).
Values are kept as raw JSON in the order written. MongoDB's rules are enforced:

* inclusion and exclusion cannot be mixed, except for `_id`, which may be excluded from an
  inclusion projection or included in an exclusion one (`invalid_combination`); the first
  decisive field sets the mode, as in MongoDB;
* computed fields are not allowed in an exclusion projection (`{$meta: ...}` excepted);
* the body and sub-projections must not be empty;
* field paths must not be empty or start with `$`, and may not collide (`a` with `a.b`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pipeline_stages._base import (
    BodySpec,
    ProblemCode,
    ProjectionKind,
    classify,
    describe,
    field_name_problem,
    join_path,
    path_collisions,
)
from pipeline_stages._problems import ErrorList, Loc

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$project"
OPERATOR_NAME = "ProjectOperator"

Kind = ProjectionKind


@dataclass
class _ModeTracker:
    """Walks a projection in order and records where inclusion and exclusion get mixed."""

    errors: ErrorList
    mode: Literal["include", "exclude"] | None = None
    paths: list[tuple[str, Loc]] = field(default_factory=list)

    def walk(self, body: dict[str, Any], loc: Loc, prefix: str) -> None:
        for name, value in body.items():
            here, path = (*loc, name), f"{prefix}{name}"
            if problem := field_name_problem(name, dotted=True):
                self.errors.add(here, ProblemCode.INVALID_VALUE, problem, name)
                continue
            kind = classify(value)
            if kind == "nested":
                self.walk(value, here, path + ".")
                continue
            if isinstance(value, dict) and not value:
                self.errors.add(
                    here,
                    ProblemCode.INVALID_VALUE,
                    "An empty sub-projection is not a valid value",
                    value,
                )
                continue
            self.paths.append((path, here))
            if path == "_id" and kind in ("include", "exclude"):
                continue  # _id may go either way in both kinds of projection
            self._note(kind, here, path, value)

    def _note(self, kind: Kind, loc: Loc, path: str, value: Any) -> None:
        wanted: Literal["include", "exclude"] | None = (
            "exclude" if kind == "exclude" else None if kind == "meta" else "include"
        )
        if wanted is None:
            return
        if self.mode is None:
            self.mode = wanted
        elif self.mode != wanted:
            self.errors.add(
                loc, ProblemCode.INVALID_COMBINATION, _mix_message(kind, path, self.mode), value
            )


def _mix_message(kind: Kind, path: str, mode: str) -> str:
    if kind == "computed":
        return f"Cannot use an expression for field {path} in exclusion projection"
    action = "exclusion" if kind == "exclude" else "inclusion"
    other = "inclusion" if mode == "include" else "exclusion"
    return f"Cannot do {action} on field {path} in {other} projection"


class ProjectSpec(BodySpec):
    """The body of `$project`: field path → flag, sub-projection or raw expression."""

    fields: dict[str, Any]

    @classmethod
    def _fields_from_body(cls, raw: Any) -> dict[str, Any]:
        errors = ErrorList()
        if not isinstance(raw, dict):
            errors.add(
                (), "dict_type", f"$project takes a projection object, got {describe(raw)}", raw
            )
        elif not raw:
            errors.add((), "too_short", "$project requires at least one output field, got {}", raw)
        else:
            tracker = _ModeTracker(errors)
            tracker.walk(raw, (), "")
            locs = dict(tracker.paths)
            for path, earlier in path_collisions([path for path, _ in tracker.paths]):
                errors.add(
                    locs[path],
                    ProblemCode.INVALID_COMBINATION,
                    f"Path collision: {describe(path)} overlaps {describe(earlier)}",
                    path,
                )
        errors.raise_if_any(cls.__name__)
        return {"fields": raw}

    @property
    def is_exclusion(self) -> bool:
        """True for an exclusion projection (including `{_id: 0}` alone)."""
        mode = _first_mode(self.fields, top=True)
        if mode is None:
            return classify(self.fields.get("_id", 1)) == "exclude"
        return mode == "exclude"


def _first_mode(body: dict[str, Any], *, top: bool) -> str | None:
    """The mode set by the first decisive field (depth first, in order), if any."""
    for name, value in body.items():
        kind = classify(value)
        if kind == "nested":
            kind_inside = _first_mode(value, top=False)
            if kind_inside is not None:
                return kind_inside
        elif not (kind == "meta" or (top and name == "_id" and kind in ("include", "exclude"))):
            return "exclude" if kind == "exclude" else "include"
    return None


def compile(spec: ProjectSpec, frame: StreamFrame, ctx: CompileContext, path: str) -> StreamFrame:  # noqa: A001
    """Reshape healthy documents; a failing computed field sends the document to the DLQ."""
    from pipeline_stages._stream.stateless import apply_document, project_document

    body = join_path(path, KEY)
    return apply_document(
        frame,
        lambda scope: project_document(
            spec.fields,
            exclusion=spec.is_exclusion,
            scope=scope,
            path=body,
            problems=ctx.problems,
        ),
        operator=OPERATOR_NAME,
    )
