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

The operator engine runs it as one tumbling window from the epoch, longer than any date
(`WindowGeometry.global_window`), with no allowed lateness and no idle timeout: no watermark
reaches its end, so it never closes and nothing is late, and its panes are the fixed-window
panes (`runtime.panes`). Its results' `_stream_meta.window` has the pane and no start or end
(`runtime.values.window_meta`), and its stats no open-window start. It holds dates before
1970 too (Atlas's windows start at the epoch or later). An inner pipeline that needs every
document with its window (no `$group`, or a stage reading the window before it) puts each
document in the one window, whose metadata is then empty (`spark.inner.explode_fixed`). The
batch window engine fires no panes: it refuses `trigger`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field, StrictBool

from pipeline_stages._base import ProblemCode
from pipeline_stages._problems import ErrorList
from pipeline_stages._windowing.geometry import WindowGeometry
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

    @property
    def event_time(self) -> bool:
        """Documents are placed by event time (in the one window), never by the clock."""
        return True

    def allowed_lateness_ms(self) -> int:
        """No lateness is needed: the window never closes, so no document is late."""
        return 0

    def idle_timeout_ms(self) -> None:
        """The window never closes, on the clock or otherwise."""
        return None

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
    """Compile as the one fixed window over all time (see the module docstring)."""
    from pipeline_stages._windowing.spark.compile import compile_window

    return compile_window(
        spec, frame, ctx, path, key=KEY, kind="fixed", geometry=WindowGeometry.global_window()
    )
