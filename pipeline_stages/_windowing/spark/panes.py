"""Which panes (issue 25) a window's compile lets through to the operator (`C.PaneSpec`).

The operator fires EARLY panes (`trigger.early`: `count` or processing-time `every`), the
ON_TIME pane, and LATE panes (`trigger.late`, `count` or `every`, the Beam model) of tumbling,
hopping, session and sliding event-time windows (EARLY and ON_TIME of processing-time ones:
they have no late documents), accumulating (with or without `onlyUpdatedPanes`), discarding or
accumulating and retracting (`runtime.panes`, `runtime.pane_firing`, `runtime.session_panes`,
with retractions when sessions merge). A stage after the window's `$group` that may empty a
pane, other than a `$match` the operator runs, is refused at its path with
`unsupported_option`: a window is never run without the panes its user asked for.
"""

from __future__ import annotations

from typing import Any

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.query import unsupported
from pipeline_stages._windowing.spark.inner import InnerSplit, InnerStage


def pane_spec(spec: Any) -> C.PaneSpec | None:
    """The panes the window fires (`C.PaneSpec`; None without `trigger`: Atlas's one result).

    The operator fires every pane the parser accepts (`_windowing.triggers`) on every window
    kind: EARLY and LATE panes (`count` or `every`) and the ON_TIME pane of tumbling, hopping,
    session and sliding event-time windows, in every `accumulationMode` (`onlyUpdatedPanes`
    too; `runtime.panes`, `runtime.session_panes`), the EARLY panes of `$globalWindow` (one
    window that never closes), and the EARLY and ON_TIME panes of processing-time windows
    (the parser refuses `late` there)."""
    trigger = spec.trigger
    if trigger is None:
        return None
    early, late = trigger.early, trigger.late
    return C.PaneSpec(
        mode=spec.accumulation,
        early_count=early.count if early is not None else None,
        late_count=late.count if late is not None else None,
        only_updated=trigger.only_updated_panes,
        early_every_ms=early.every_ms if early is not None else None,
        late_every_ms=late.every_ms if late is not None else None,
    )


#: Inner stages after the window's blocking part that pass every document on (one out per one
#: in, but for a document that fails and goes to the DLQ).
ONE_FOR_ONE = frozenset(
    {"$set", "$addFields", "$project", "$unset", "$replaceRoot", "$replaceWith"}
)


def with_pane_filters(split: InnerSplit, key: str, problems: Any) -> InnerSplit:
    """With `trigger`: the `$match` stages right after the window's blocking part join it, so
    that the operator runs them (`runtime.query`) and knows when a pane emits nothing (such a
    pane must not be fired nor take an index). Refused at its path: a `$match` whose filter
    the operator cannot evaluate, and any later stage that may drop documents (`$match` after
    a stage that reshapes them, `$unwind`, ...): it would run in Spark after the operator."""
    suffix = list(split.suffix)
    moved: list[InnerStage] = []
    while split.blocking and suffix and suffix[0].key == "$match":
        stage = suffix[0]
        problem = unsupported(stage.spec.filter)
        if problem is not None:
            problems.error(
                join_path(stage.path, stage.key),
                ProblemCode.UNSUPPORTED_OPTION,
                f"{key}: with trigger, a $match after the window's $group/$sort runs in the "
                f"window operator, which does not evaluate {problem} yet (it knows $eq, $ne, "
                "$gt, $gte, $lt, $lte, $in, $nin, $exists, $not, $and, $or and $nor)",
            )
            return split
        moved.append(suffix.pop(0))
    for stage in suffix:
        if stage.key not in ONE_FOR_ONE:
            problems.error(
                join_path(stage.path, stage.key),
                ProblemCode.UNSUPPORTED_OPTION,
                f"{key}: {stage.key} after the window's $group/$sort is not supported with "
                "trigger yet (only right after them, for $match): a pane it empties would "
                "still be fired",
            )
            break
    return InnerSplit(split.prefix, (*split.blocking, *moved), tuple(suffix))
