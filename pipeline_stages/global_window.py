"""`$globalWindow`: a Sluice extension, NOT an Atlas stage (Beam's / Apex's global window).

One window over all time: it never closes, so no document is ever late and it fires only
EARLY panes (see `_windowing.triggers`). Its results carry `_stream_meta.window.pane` and no
window start or end. Fields:

* `trigger` (required) with `trigger.early` (required): when panes fire; `trigger.late` is
  refused (a window that never closes has no late documents);
* `accumulationMode` (default `accumulating`): what a pane holds;
* `pipeline` (required, non-empty): the inner pipeline, with the same rules as Atlas windows;
* `allowUnboundedState` (default false): the window's state is bounded only by its `$group`
  groups, so an inner pipeline that keeps documents (`$push`, `$addToSet`, a `$sort` or no
  `$group`/`$count`) would grow without bound; it is refused unless this is true. A
  `discarding` window drops its documents at every pane, so the rule does not apply to it.

There is no `interval`, `boundary`, `allowedLateness` or `idleTimeout`: they are refused as
unknown fields. The DLQ operator of a window is that of the first window-aware operator of its
inner pipeline, so this module has no `OPERATOR_NAME`.

The window engines fire panes of tumbling and hopping windows only (`_windowing.spark.panes`),
not of a global window yet: `compile` refuses the stage (`unsupported_option`
at `trigger`) until they do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, StrictBool

from pipeline_stages._base import PipelineInvalid, ProblemCode, join_path
from pipeline_stages._problems import ErrorList
from pipeline_stages._windowing.stage_fields import WindowSpecBase
from pipeline_stages._windowing.triggers import Trigger, late_rule, unbounded_state

if TYPE_CHECKING:
    from pipeline_stages._stream.context import CompileContext, WindowPlan
    from pipeline_stages._stream.frame import StreamFrame


KEY = "$globalWindow"


class GlobalWindowSpec(WindowSpecBase):
    """The body of the Sluice `$globalWindow` extension."""

    trigger: Trigger
    allow_unbounded_state: StrictBool = Field(default=False, alias="allowUnboundedState")

    @classmethod
    def _check_raw(cls, raw: Mapping[str, Any], errors: ErrorList) -> None:
        super()._check_raw(raw, errors)
        trigger = raw.get("trigger")
        if isinstance(trigger, Mapping) and "early" not in trigger:
            errors.add(
                ("trigger", "early"),
                "missing",
                "trigger.early is required on $globalWindow: the window never closes, so "
                "early panes are the only ones it fires",
                dict(trigger),
            )
        late_rule(
            raw,
            errors,
            why="trigger.late cannot be set on $globalWindow: the window never closes, so no "
            "document is late",
        )
        if raw.get("allowUnboundedState") is True or raw.get("accumulationMode") == "discarding":
            return
        for loc, problem in unbounded_state(raw.get("pipeline")):
            errors.add(
                loc,
                ProblemCode.INVALID_COMBINATION,
                f"{problem}, so its state would grow without bound; set allowUnboundedState: "
                'true to accept that, or use accumulationMode "discarding"',
                None,
            )


def compile(
    spec: GlobalWindowSpec, frame: StreamFrame, ctx: CompileContext, path: str
) -> WindowPlan:  # noqa: A001
    """Refused until the window engines fire global-window panes (see the module docstring)."""
    del spec, frame
    ctx.problems.error(
        join_path(path, KEY, "trigger"),
        ProblemCode.UNSUPPORTED_OPTION,
        f"{KEY} is not supported by the window engines yet: they fire no global-window panes",
    )
    raise PipelineInvalid(list(ctx.problems.problems), list(ctx.problems.warnings))
