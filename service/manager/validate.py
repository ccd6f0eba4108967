"""Checking a processor definition before it is stored or started.

`check_definition` runs everything that needs no Spark, collecting all problems at once:
`parse_pipeline` (shapes, specs, placement), `check_options` (option-dependent errors), the
connections the pipeline and its DLQ name, and what the sink's connection type rules out. The engine
then compiles the pipeline (`Engine.check`), which finds expression-level problems.

`check_resumable_modify` enforces Atlas's rules for `resumeFromCheckpoint: true`
(atlas-semantics.md §7.4): the `$source` and the window cannot change in ways the checkpoint
cannot follow.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline_stages import ParsedPipeline, check_options, lint_pipeline, parse_pipeline
from pipeline_stages._base import PipelineInvalid, Problem, ProblemCode, ProblemCollector
from pipeline_stages._windowing.stage_fields import WindowSpecBase
from service.errors import ModificationRejected, PipelineRejected

#: Connection types a DLQ can be written to.
DLQ_CONNECTION_TYPES = frozenset({"Local", "Cluster"})

#: Looks a connection's type up by name (None when there is no such connection).
ConnectionTypeOf = Callable[[str], str | None]


@dataclass(frozen=True)
class Definition:
    """A checked definition: the raw pipeline, its parsed form, the DLQ target, warnings."""

    pipeline: list[Any]
    parsed: ParsedPipeline
    dlq: Mapping[str, str] | None
    has_dlq: bool
    warnings: list[Problem]


def check_definition(
    pipeline: list[Any],
    dlq: Mapping[str, str] | None,
    *,
    type_of: ConnectionTypeOf,
    default_dlq: bool,
) -> Definition:
    """Every Spark-free check of a definition; raises `PipelineRejected` with all problems."""
    has_dlq = dlq is not None or default_dlq
    problems = [*_connection_problems(pipeline, type_of), *_dlq_problems(dlq, type_of)]
    try:
        parsed = parse_pipeline(pipeline)
    except PipelineInvalid as error:
        raise _rejected([*error.problems, *problems], error.warnings) from None
    problems = [
        *check_options(parsed, has_dlq=has_dlq),
        *problems,
        *_sink_problems(parsed, type_of),
    ]
    warnings = lint_pipeline(parsed, has_dlq=has_dlq)
    if problems:
        raise _rejected(problems, warnings)
    return Definition(pipeline, parsed, dlq, has_dlq, warnings)


def _rejected(problems: list[Problem], warnings: list[Problem]) -> PipelineRejected:
    count = len(problems)
    return PipelineRejected(
        f"the pipeline has {count} problem{'s' if count != 1 else ''}",
        problems=problems,
        warnings=warnings,
    )


def rejected_by_compiler(error: PipelineInvalid) -> PipelineRejected:
    """The API error for compile problems found by the engine."""
    return _rejected(error.problems, error.warnings)


def _connection_problems(pipeline: list[Any], type_of: ConnectionTypeOf) -> list[Problem]:
    """`$source.connectionName` must name a registered connection (read from the raw JSON,
    so the problem is reported together with any parse problems)."""
    source = pipeline[0].get("$source") if pipeline and isinstance(pipeline[0], dict) else None
    name = source.get("connectionName") if isinstance(source, dict) else None
    if not isinstance(name, str) or type_of(name) is not None:
        return []
    return [
        Problem(
            ProblemCode.UNKNOWN_CONNECTION,
            "/pipeline/0/$source/connectionName",
            f"no connection named {name!r} is registered (see GET /api/v1/connections)",
        )
    ]


def _sink_problems(parsed: ParsedPipeline, type_of: ConnectionTypeOf) -> list[Problem]:
    """What the sink's connection type rules out (unknown connection, wrong type, an option
    the stores cannot apply), from connection types alone; the compiler checks the rest."""
    from pipeline_stages._connectors.sinks.planning import plan_sink
    from pipeline_stages._stream.context import ConnectionInfo

    if parsed.sink is None:
        return []

    def connection_of(name: str) -> ConnectionInfo | None:
        kind = type_of(name)
        return None if kind is None else ConnectionInfo(name, kind)

    collector = ProblemCollector()
    plan_sink(parsed.sink, connection_of=connection_of, problems=collector)
    return collector.problems


def _dlq_problems(dlq: Mapping[str, str] | None, type_of: ConnectionTypeOf) -> list[Problem]:
    if dlq is None:
        return []
    path = "/options/dlq/connectionName"
    kind = type_of(dlq["connectionName"])
    if kind is None:
        message = f"no connection named {dlq['connectionName']!r} is registered"
        return [Problem(ProblemCode.UNKNOWN_CONNECTION, path, message)]
    if kind not in DLQ_CONNECTION_TYPES:
        message = f"a DLQ needs a Cluster connection or 'local', got a {kind} connection"
        return [Problem(ProblemCode.INVALID_VALUE, path, message)]
    return []


# --------------------------------------------------------------------------- modify (§7.4)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=False, separators=(",", ":"))


def _window_body(pipeline: list[Any], parsed: ParsedPipeline) -> tuple[str, dict[str, Any]] | None:
    """`(key, body)` of the pipeline's window stage, or None."""
    window = parsed.window
    if window is None:
        return None
    body = pipeline[parsed.stages.index(window)][window.key]
    return window.key, body if isinstance(body, dict) else {}


def check_resumable_modify(old: list[Any], new: Definition, *, timers: bool | None = None) -> None:
    """Raise `ModificationRejected` when a resumed checkpoint cannot follow the change;
    `timers`: whether the checkpoint's window operator has wall-clock timers
    (`service.runtime.window_pins.checkpoint_timers`)."""
    old_parsed = parse_pipeline(old)
    problems: list[Problem] = []
    window = new.parsed.window
    if timers is False and window is not None and isinstance(window.spec, WindowSpecBase):
        problems.extend(
            _not_resumable(
                f"{window.path}/{window.key}/{field}",
                f"{field} closes windows or fires panes on the wall clock, and this "
                "processor's checkpoint runs its window without wall-clock timers",
            )
            for field in window.spec.wall_clock_fields()
        )
    if _canonical(old[0]) != _canonical(new.pipeline[0]):
        problems.append(_not_resumable("/pipeline/0/$source", "$source cannot change"))
    old_window = _window_body(old, old_parsed)
    new_window = _window_body(new.pipeline, new.parsed)
    window_path = new.parsed.window.path if new.parsed.window is not None else "/pipeline"
    if old_window is not None and new_window is None:
        problems.append(_not_resumable("/pipeline", "the window stage cannot be removed"))
    elif old_window is None and new_window is not None:
        problems.append(_not_resumable(window_path, "a window stage cannot be added"))
    elif old_window is not None and new_window is not None:
        inner = {stage.key for stage in old_parsed.window_stages}
        problems.extend(_window_changes(old_window, new_window, inner, window_path))
    if problems:
        raise ModificationRejected(
            f"the modification cannot resume from the checkpoint ({len(problems)} problem(s))",
            problems=problems,
        )


_HINT = "; modify with resumeFromCheckpoint: false to start from a fresh checkpoint"


def _not_resumable(path: str, message: str) -> Problem:
    return Problem("modify_not_resumable", path, message + _HINT)


def _window_changes(
    old: tuple[str, dict[str, Any]],
    new: tuple[str, dict[str, Any]],
    old_inner_keys: set[str],
    path: str,
) -> list[Problem]:
    (old_key, old_body), (new_key, new_body) = old, new
    if old_key != new_key:
        return [
            _not_resumable(
                f"{path}/{new_key}", f"the window type cannot change ({old_key} to {new_key})"
            )
        ]
    problems = [
        _not_resumable(f"{path}/{new_key}/{field}", f"the window {field} cannot change")
        for field in ("interval", "hopSize", "gap", "partitionBy")
        if _canonical(old_body.get(field)) != _canonical(new_body.get(field))
    ]
    if _canonical(old_body) != _canonical(new_body) and not old_inner_keys & {"$group", "$sort"}:
        message = "a window without $group or $sort cannot be modified"
        problems.append(_not_resumable(f"{path}/{new_key}/pipeline", message))
    return problems
