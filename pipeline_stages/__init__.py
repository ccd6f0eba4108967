"""Atlas pipeline stages: the registry, the `Stage` tagged union and `parse_pipeline`.

Adding a stage means adding its module and one `REGISTRY` line; the `Stage` union is
generated from the registry (style guide C.6). `parse_pipeline` validates a whole pipeline in
one pass and raises `PipelineInvalid` with every problem found: stage shapes, unknown and
unsupported stages, every spec error (pydantic), and the placement rules of
atlas-semantics.md §2. `check_options` adds the errors that depend on processor options and
`lint_pipeline` the warnings (style guide D.12).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import BeforeValidator, Discriminator, Tag, TypeAdapter, ValidationError

from pipeline_stages import (
    add_fields,
    cached_lookup,
    count,
    emit,
    global_window,
    group,
    hopping_window,
    https,
    limit,
    lookup,
    match,
    merge,
    project,
    redact,
    replace_root,
    replace_with,
    session_window,
    set,
    set_stream_meta,
    sliding_window,
    sort,
    source,
    throttle,
    tumbling_window,
    unset,
    unwind,
    validate,
)
from pipeline_stages._base import (
    AtlasBody,
    BodySpec,
    PipelineInvalid,
    Problem,
    ProblemCode,
    ProblemCollector,
    StageModel,
    custom_error,
    describe,
    join_path,
)
from pipeline_stages._entry import Placement, StageEntry, bind_entry, entry_of, key_of
from pipeline_stages._mql.scan import scan_pipeline
from pipeline_stages._placement import StageRoles, check_placement, single_key
from pipeline_stages._problems import ATLAS_CONTEXT, problems_from_validation_error
from pipeline_stages._windowing.stage_fields import WindowSpecBase

__all__ = [
    "KNOWN_UNSUPPORTED",
    "REGISTRY",
    "ParsedPipeline",
    "ParsedStage",
    "Placement",
    "Stage",
    "StageEntry",
    "check_options",
    "key_of",
    "lint_pipeline",
    "parse_pipeline",
    "parse_stage",
]


def _entry(
    module: ModuleType, spec: type[StageModel], placement: Placement
) -> tuple[str, StageEntry]:
    return module.KEY, bind_entry(StageEntry(module.KEY, module, spec, placement))


REGISTRY: dict[str, StageEntry] = dict(
    [
        _entry(source, source.SourceSpec, Placement.MAIN),
        _entry(validate, validate.ValidateSpec, Placement.BOTH),
        _entry(match, match.MatchSpec, Placement.BOTH),
        _entry(project, project.ProjectSpec, Placement.BOTH),
        _entry(add_fields, add_fields.AddFieldsSpec, Placement.BOTH),
        _entry(set, set.SetSpec, Placement.BOTH),
        _entry(unset, unset.UnsetSpec, Placement.BOTH),
        _entry(replace_root, replace_root.ReplaceRootSpec, Placement.BOTH),
        _entry(replace_with, replace_with.ReplaceWithSpec, Placement.BOTH),
        _entry(unwind, unwind.UnwindSpec, Placement.BOTH),
        _entry(redact, redact.RedactSpec, Placement.BOTH),
        _entry(lookup, lookup.LookupSpec, Placement.BOTH),
        _entry(cached_lookup, cached_lookup.CachedLookupSpec, Placement.BOTH),
        _entry(https, https.HttpsSpec, Placement.BOTH),
        _entry(throttle, throttle.ThrottleSpec, Placement.MAIN),
        _entry(tumbling_window, tumbling_window.TumblingWindowSpec, Placement.MAIN),
        _entry(hopping_window, hopping_window.HoppingWindowSpec, Placement.MAIN),
        _entry(session_window, session_window.SessionWindowSpec, Placement.MAIN),
        _entry(sliding_window, sliding_window.SlidingWindowSpec, Placement.MAIN),
        _entry(global_window, global_window.GlobalWindowSpec, Placement.MAIN),
        _entry(group, group.GroupSpec, Placement.WINDOW),
        _entry(sort, sort.SortSpec, Placement.WINDOW),
        _entry(limit, limit.LimitSpec, Placement.WINDOW),
        _entry(count, count.CountSpec, Placement.WINDOW),
        _entry(emit, emit.EmitSpec, Placement.MAIN),
        _entry(merge, merge.MergeSpec, Placement.MAIN),
        _entry(set_stream_meta, set_stream_meta.SetStreamMetaSpec, Placement.MAIN),
    ]
)

SOURCE_KEY = source.KEY
SINK_KEYS = frozenset({merge.KEY, emit.KEY})
WINDOW_KEYS = frozenset(k for k, e in REGISTRY.items() if issubclass(e.spec, WindowSpecBase))
_IN_WINDOW = frozenset(k for k, e in REGISTRY.items() if e.in_window)
_ROLES = StageRoles(
    known=frozenset(REGISTRY),
    source=SOURCE_KEY,
    sinks=SINK_KEYS,
    windows=WINDOW_KEYS,
    main_only_excluded=frozenset(k for k, e in REGISTRY.items() if not e.in_main),
    in_window=_IN_WINDOW,
)
#: Stages that work on a window's contents; the first one names the window's DLQ operator.
WINDOW_AWARE_KEYS = frozenset({group.KEY, sort.KEY, count.KEY, limit.KEY})

#: Documented stages Sluice refuses by name (`unsupported_stage`), with the reason.
KNOWN_UNSUPPORTED: Mapping[str, str] = {
    "$externalFunction": "external (AWS Lambda) functions are not available in Sluice",
    **dict.fromkeys(("$bucket", "$bucketAuto", "$changeStream", "$collStats", "$densify", "$documents", "$facet", "$fill", "$geoNear", "$graphLookup", "$indexStats", "$out", "$sample", "$search", "$searchMeta", "$setWindowFields", "$skip", "$sortByCount", "$unionWith", "$vectorSearch"), "it is a MongoDB aggregation stage that Atlas Stream Processing does not support"),
}  # fmt: skip


# --------------------------------------------------------------------------- the Stage union


def _stage_name_hint(key: str) -> str:
    candidates = difflib.get_close_matches(key, [*REGISTRY, *KNOWN_UNSUPPORTED], n=1, cutoff=0.6)
    if not candidates and not key.startswith("$"):
        candidates = difflib.get_close_matches("$" + key, list(REGISTRY), n=1, cutoff=0.6)
    return f"; did you mean '{candidates[0]}'?" if candidates else ""


def _check_stage_shape(value: Any) -> Any:
    key = single_key(value)
    if key is None:
        got = f"{len(value)} keys" if isinstance(value, dict) else describe(value)
        raise custom_error(
            ProblemCode.STAGE_SHAPE,
            f"A stage must be an object with exactly one key, the stage name, got {got}",
        )
    if key in KNOWN_UNSUPPORTED:
        raise custom_error(
            ProblemCode.UNSUPPORTED_STAGE, f"Unsupported stage: {key}: {KNOWN_UNSUPPORTED[key]}"
        )
    if key not in REGISTRY:
        raise custom_error(
            ProblemCode.UNKNOWN_STAGE, f"Unknown stage '{key}'{_stage_name_hint(key)}"
        )
    return value


def _unwrap(key: str, spec: type[StageModel], value: Any) -> Any:
    body = value[key]
    return AtlasBody(body) if issubclass(spec, BodySpec) else body


if TYPE_CHECKING:
    Stage = StageModel
else:
    #: A stage object `{"$key": body}` validated to its spec; the tag (the key) shows in `loc`.
    Stage = Annotated[
        Union[  # noqa: UP007 - a runtime-built union needs the subscript form
            tuple(
                Annotated[e.spec, BeforeValidator(partial(_unwrap, k, e.spec)), Tag(k)]
                for k, e in REGISTRY.items()
            )
        ],
        Discriminator(single_key),
        BeforeValidator(_check_stage_shape),
    ]

for _entry_ in REGISTRY.values():
    if issubclass(_entry_.spec, WindowSpecBase | https.HttpsSpec):
        _entry_.spec.model_rebuild(_types_namespace={"Stage": Stage})
del _entry_

_STAGE_ADAPTER: TypeAdapter[StageModel] = TypeAdapter(Stage)


# --------------------------------------------------------------------------- parsed pipeline


@dataclass(frozen=True)
class ParsedStage:
    """A validated stage: its key, spec, and the JSON pointer of the stage object."""

    key: str
    spec: StageModel
    path: str

    def at(self, *tokens: str | int) -> str:
        """A JSON pointer inside the stage body: `at("interval", "size")`."""
        return join_path(self.path, self.key, *tokens)

    @property
    def entry(self) -> StageEntry:
        """The registry entry of the stage."""
        return entry_of(self.spec)

    @property
    def operator_name(self) -> str | None:
        """The Atlas DLQ operator name of the stage (None for window stages)."""
        return self.entry.operator_name


@dataclass(frozen=True)
class ParsedPipeline:
    """A pipeline that passed `parse_pipeline`: `$source` first, at most one window and sink."""

    stages: tuple[ParsedStage, ...]
    path: str = "/pipeline"

    @property
    def source(self) -> ParsedStage:
        """The `$source` stage (always the first)."""
        return self.stages[0]

    @property
    def sink(self) -> ParsedStage | None:
        """The `$merge` / `$emit` stage (or a last `$https`), or None for an ephemeral pipeline."""
        last = self.stages[-1]
        return (
            last
            if last.key in SINK_KEYS or (last.key == https.KEY and len(self.stages) > 1)
            else None
        )

    @property
    def has_sink(self) -> bool:
        """Whether the pipeline ends in a sink (without one, output goes to the caller)."""
        return self.sink is not None

    def _window_index(self) -> int | None:
        return next((i for i, s in enumerate(self.stages) if s.key in WINDOW_KEYS), None)

    @property
    def window(self) -> ParsedStage | None:
        """The window stage, if any."""
        index = self._window_index()
        return None if index is None else self.stages[index]

    @property
    def middle(self) -> tuple[ParsedStage, ...]:
        """The stages between `$source` and the sink (the sink excluded when present)."""
        return self.stages[1 : len(self.stages) - (1 if self.has_sink else 0)]

    @property
    def before_window(self) -> tuple[ParsedStage, ...]:
        """Middle stages before the window (all of them when there is no window)."""
        index = self._window_index()
        return self.middle if index is None else self.stages[1:index]

    @property
    def after_window(self) -> tuple[ParsedStage, ...]:
        """Middle stages after the window (empty when there is no window)."""
        index = self._window_index()
        return () if index is None else self.middle[index:]

    @property
    def window_stages(self) -> tuple[ParsedStage, ...]:
        """The window's inner pipeline as `ParsedStage`s with absolute paths."""
        window = self.window
        if window is None:
            return ()
        inner = window.spec.pipeline if isinstance(window.spec, WindowSpecBase) else ()
        return tuple(
            ParsedStage(key_of(spec), spec, window.at("pipeline", i))
            for i, spec in enumerate(inner)
        )

    @property
    def window_operator_name(self) -> str | None:
        """The DLQ operator of the window: that of its first window-aware stage."""
        aware = (s for s in self.window_stages if s.key in WINDOW_AWARE_KEYS)
        first = next(aware, None)
        return first.operator_name if first else None

    def walk(self) -> Iterator[ParsedStage]:
        """Every stage in pipeline order, a window's inner stages right after the window."""
        for stage in self.stages:
            yield stage
            if stage.key in WINDOW_KEYS:
                yield from self.window_stages


# --------------------------------------------------------------------------- parsing


def _validate_stage(raw: Any, path: str, collector: ProblemCollector) -> StageModel | None:
    try:
        # by_name=False: Atlas JSON must use the camelCase names; snake_case is Python-only.
        return _STAGE_ADAPTER.validate_python(
            raw, by_alias=True, by_name=False, context=ATLAS_CONTEXT
        )
    except ValidationError as exc:
        collector.extend(problems_from_validation_error(exc, base=path))
        return None


def parse_stage(raw: Any, *, path: str = "/pipeline/0") -> ParsedStage:
    """Validate one stage object, without placement rules; raises `PipelineInvalid`."""
    collector = ProblemCollector()
    spec = _validate_stage(raw, path, collector)
    collector.raise_if_any()
    if spec is None:  # unreachable: no problems means a spec; kept for the type checker
        raise PipelineInvalid([Problem(ProblemCode.STAGE_SHAPE, path, "invalid stage")])
    return ParsedStage(key_of(spec), spec, path)


def parse_pipeline(raw: Any, *, path: str = "/pipeline") -> ParsedPipeline:
    """Validate a whole Atlas pipeline; raise `PipelineInvalid` with every problem found."""
    collector = ProblemCollector()
    if not isinstance(raw, list):
        collector.error(
            path, "list_type", f"A pipeline must be an array of stages, got {describe(raw)}"
        )
    elif not raw:
        collector.error(path, "too_short", "A pipeline must have at least a $source stage, got []")
    else:
        stages = []
        for index, item in enumerate(raw):
            spec = _validate_stage(item, join_path(path, index), collector)
            if spec is not None:
                stages.append(ParsedStage(key_of(spec), spec, join_path(path, index)))
        # Operators inside expressions and filters, also beside structural problems: the
        # compilers would find them only once Spark runs.
        seen = {(p.code, p.path) for p in collector.problems}
        collector.extend([p for p in scan_pipeline(raw, path) if (p.code, p.path) not in seen])
        collector.extend(check_placement(raw, path, _ROLES))
    collector.raise_if_any()
    return ParsedPipeline(tuple(stages), path)


# --------------------------------------------------------------------------- options and lint


def check_options(parsed: ParsedPipeline, *, has_dlq: bool) -> list[Problem]:
    """Errors that depend on processor options (Atlas reports them when planning)."""
    problems = []
    for stage in parsed.walk():
        if (
            isinstance(stage.spec, validate.ValidateSpec)
            and stage.spec.validation_action == "dlq"
            and not has_dlq
        ):
            problems.append(
                Problem(
                    code=str(ProblemCode.INVALID_COMBINATION),
                    path=stage.at("validationAction"),
                    message="DLQ must be specified if validation action is dlq.",
                )
            )
    return problems


def lint_pipeline(parsed: ParsedPipeline, *, has_dlq: bool) -> list[Problem]:
    """Warnings: valid pipelines that may lose data or never emit (style guide D.12)."""
    window = parsed.window
    if window is None or not isinstance(window.spec, WindowSpecBase):
        return []
    return [
        Problem(code, window.at(*loc), f"{window.key} {message}")
        for code, loc, message in window.spec.warnings(has_dlq=has_dlq)
    ]
