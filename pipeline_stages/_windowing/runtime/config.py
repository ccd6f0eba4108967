"""What the window operator needs to know, as small picklable dataclasses.

The compile step (driver, Spark) and the operator (Python workers, pandas) share these: the
compile step decides which columns it ships and how the inner pipeline is split, the operator
reads the same description to interpret the rows. Nothing here imports Spark.

Row flags (`FLAG`, one per shipped row) say what a row is to the operator:

| flag | meaning                                                                      |
|------|------------------------------------------------------------------------------|
| 0    | a document entering the window, healthy after the inner per-document part   |
| 1    | a tick: dropped before the window; only its event time matters (watermark)  |
| 2    | failed before the window: forwarded to the DLQ, advances the watermark      |
| 3    | failed in the window's per-document part: DLQ for each open window it enters |
| 4    | failed at the source (no event time): forwarded to the DLQ only             |
| 5    | a clock row of the test clock (virtual processing time in `event_ms`)       |
| 6    | dropped by the window's per-document part (`$match`): creates its windows   |
| 7    | a source failure another bucket forwards: an arrival, nothing else           |

When P > 1 buckets split a window's groups, every bucket gets every row
(`spark.compile._bucketed`): its owner the row itself, the others a *shadow* without content
whose flag says only what the row does to the watermark, the idleness and the window set
(`SHADOW_FLAGS`): 0, 3 and 6 become 6, 1 and 2 become 1, 4 becomes 7.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline_stages._windowing.geometry import WindowGeometry

FLAG_OK = 0
FLAG_TICK = 1
FLAG_FAILED_BEFORE = 2
FLAG_FAILED_INSIDE = 3
FLAG_SOURCE_FAILED = 4
FLAG_CLOCK = 5
FLAG_DROPPED_INSIDE = 6
FLAG_SOURCE_FAILED_ELSEWHERE = 7

#: Flags of rows that entered the window (lateness is decided for them, they create windows).
ENTERED = (FLAG_OK, FLAG_FAILED_INSIDE, FLAG_DROPPED_INSIDE)
#: Flags of rows that do not advance the watermark (no event time).
UNCOUNTED = (FLAG_SOURCE_FAILED, FLAG_SOURCE_FAILED_ELSEWHERE)
#: A row's flag -> its shadow's flag in the buckets that do not own it (see the module doc).
SHADOW_FLAGS = {
    FLAG_OK: FLAG_DROPPED_INSIDE,
    FLAG_FAILED_INSIDE: FLAG_DROPPED_INSIDE,
    FLAG_DROPPED_INSIDE: FLAG_DROPPED_INSIDE,
    FLAG_TICK: FLAG_TICK,
    FLAG_FAILED_BEFORE: FLAG_TICK,
    FLAG_SOURCE_FAILED: FLAG_SOURCE_FAILED_ELSEWHERE,
    FLAG_CLOCK: FLAG_CLOCK,
}

# Column names of the operator's input (prefixed so they never clash with frame columns).
BUCKET = "__w_bucket"
FLAG = "__w_flag"
DOC_SUB = "__w_doc_sub"
WSTART = "__w_wstart"
ORIG = "__w_orig"
#: The stream metadata of an unstamped document, for stamping its late copy (`runtime.stamp`).
OMETA = "__w_ometa"
FDOC = "__w_fdoc"
FMETA = "__w_fmeta"
REASON = "__w_reason"
OPERATOR = "__w_operator"
KEY = "__w_key"
PKEY = "__w_pkey"
DOCJ = "__w_doc"

#: Value codes of shipped MQL values (`<prefix>_k`); see `ValueColumns`.
CODE_MISSING = 0
CODE_INT = 2
CODE_DOUBLE = 4
CODE_JSON = 5

LATE_REASON = "Input document arrived late."
GROUP_OPERATOR = "GroupOperator"


@dataclass(frozen=True)
class WindowSource:
    """Facts about the pipeline's source that the window operator needs.

    Attributes:
        source_type: `_stream_meta.source.type` of emitted window results.
        meta_field: where stream metadata is projected in documents (`""`: not projected).
        partitions: the source's partition count when known (a partition that never produced
            holds the watermark back, §4.6); None means "the partitions seen so far".
        partition_idle_timeout_ms: `$source.partitionIdleTimeout` (None: disabled).
        test_clock: read processing time from clock rows instead of the wall clock (tests).
    """

    source_type: str = "generated"
    meta_field: str = "_stream_meta"
    partitions: int | None = None
    partition_idle_timeout_ms: int | None = None
    test_clock: bool = False


def window_source(ctx: Any) -> WindowSource:
    """The `WindowSource` the plan attached to a compile context (defaults when absent)."""
    found = getattr(ctx, "window_source", None)
    return found if isinstance(found, WindowSource) else WindowSource()


@dataclass(frozen=True)
class ValueColumns:
    """One MQL value shipped as typed columns: `<p>_k` code (missing, int/long, double, JSON),
    `<p>_i` BIGINT and `<p>_d` DOUBLE for numbers, `<p>_j` Extended JSON for the rest."""

    prefix: str

    @property
    def names(self) -> tuple[str, str, str, str]:
        """The four column names."""
        p = self.prefix
        return (f"{p}_k", f"{p}_i", f"{p}_d", f"{p}_j")


@dataclass(frozen=True)
class AccumulatorPlan:
    """One `$group` output field: the accumulator and the shipped values it reads.

    `inputs[0]` is the evaluated argument (`output` for `$top`…); for `$top`/`$bottom`(N)
    the following inputs are the `sortBy` field values, in `sort_fields` order.
    `root_input` marks an argument that is the whole document (`"$$ROOT"`), which gets the
    window's metadata when the window closes.
    """

    name: str
    op: str
    spec: Any
    inputs: tuple[ValueColumns, ...] = ()
    sort_fields: tuple[str, ...] = ()
    root_input: bool = False


@dataclass(frozen=True)
class GroupPlan:
    """The first blocking stage when it is `$group` (or `$count`, a `$group` in disguise)."""

    accumulators: tuple[AccumulatorPlan, ...]
    #: Set for `$count: <field>`: the output is `{<field>: n}` only.
    count_field: str | None = None


@dataclass(frozen=True)
class LaterStage:
    """A blocking stage after the first one, run in Python at close: `$sort`, `$limit`,
    `$count`, a `$group` whose expressions are field paths or constants, or (a window with
    `trigger`) a `$match` whose filter `runtime.query` evaluates: its body is the raw filter."""

    key: str
    body: Any


@dataclass(frozen=True)
class InnerPlan:
    """How the inner pipeline is split around the operator.

    `group` is set when the first blocking stage is `$group`/`$count`; `sort` when it is
    `$sort`; with neither, documents are buffered (a pass-through window). `later` are the
    blocking stages that follow the first one without a stateless stage in between.
    `needs_doc` says whether document JSON is shipped for admitted rows.
    """

    group: GroupPlan | None = None
    sort: tuple[tuple[str, int], ...] | None = None
    later: tuple[LaterStage, ...] = ()
    needs_doc: bool = False
    exploded: bool = False
    first_operator: str = "LimitOperator"
    #: The operators holding the window's state and making its results, for their stats
    #: (`spark.inner.InnerSplit`).
    state_operator: str = "LimitOperator"
    results_operator: str = "LimitOperator"


@dataclass(frozen=True)
class SessionGeometry:
    """`$sessionWindow` timing in ms."""

    gap_ms: int


@dataclass(frozen=True)
class SlidingGeometry:
    """`$slidingWindow` timing in ms (KIP-450)."""

    time_difference_ms: int


@dataclass(frozen=True)
class PaneSpec:
    """A window's `trigger` and `accumulationMode` as the operator fires them (issue 25,
    `runtime.panes`): EARLY panes every `early_count` documents or `early_every_ms` of
    processing time when set; the ON_TIME pane at close, or with `trigger.late`
    (`late_count` / `late_every_ms`) once the watermark reaches the window's end, then LATE
    panes the same way and a last one at close; `only_updated` (`onlyUpdatedPanes`). Compile
    lets only this subset through (`spark.panes.pane_spec`)."""

    mode: str  # "accumulating" | "discarding" | "accumulatingAndRetracting"
    early_count: int | None = None
    late_count: int | None = None
    only_updated: bool = False
    early_every_ms: int | None = None
    late_every_ms: int | None = None

    @property
    def has_late(self) -> bool:
        """Whether `trigger.late` is set (the Beam model: ON_TIME at `W >= end`)."""
        return self.late_count is not None or self.late_every_ms is not None

    @property
    def has_count(self) -> bool:
        """Whether a phase fires on document counts."""
        return self.early_count is not None or self.late_count is not None

    @property
    def uses_clock(self) -> bool:
        """Whether a phase fires on processing time (`every`)."""
        return self.early_every_ms is not None or self.late_every_ms is not None


@dataclass(frozen=True)
class OperatorSpec:
    """Everything the operator function needs, shipped to the Python workers once."""

    kind: str  # "fixed" | "session" | "sliding"
    geometry: WindowGeometry | SessionGeometry | SlidingGeometry
    allowed_lateness_ms: int
    idle_timeout_ms: int | None
    processing_time: bool
    inner: InnerPlan
    source: WindowSource
    has_dlq: bool
    partitioned: bool = False
    bucket_count: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    #: Set when the window fires panes (`trigger`); None: Atlas's one result per window.
    panes: PaneSpec | None = None

    @property
    def splits_groups(self) -> bool:
        """Whether P > 1 buckets share each window's content by `$group` key (tumbling and
        hopping windows whose inner pipeline's blocking part is one `$group`): groups are
        independent there. Any other window keeps all its rows in bucket 0: `$sort`, `$limit`,
        `$count` or a second `$group` after the `$group`, and windows without `$group`, need
        all of a window's documents in one place. Session and sliding windows could split by
        partition key, but they place documents one by one in Python, and every bucket would
        run that loop over every row (the shadows), so splitting would divide little; their
        merge across buckets is not built either (`Emitter.begin_window` is called by fixed
        windows only). A window that fires panes keeps its rows in bucket 0 too: a pane's
        count and index are the window's, not one bucket's share of it."""
        return (
            self.panes is None
            and self.bucket_count > 1
            and self.kind == "fixed"
            and self.inner.group is not None
            and not self.inner.later
        )

    @property
    def fires_panes_on_clock(self) -> bool:
        """Whether panes fire on processing time (an `every` trigger)."""
        return self.panes is not None and self.panes.uses_clock

    @property
    def is_global(self) -> bool:
        """Whether this is `$globalWindow`'s one window (`WindowGeometry.global_window`)."""
        return isinstance(self.geometry, WindowGeometry) and self.geometry.is_global

    @property
    def runs_when_idle(self) -> bool:
        """Whether buckets may have to run in micro-batches without their input: something
        closes windows or fires panes on the wall clock (`idleTimeout`, processing-time
        windows, partition idleness, `every` triggers; `runtime.operator.state_timeout_ms`
        says when). Otherwise only input moves the watermark, and an input-less call would
        only unpickle and rewrite the state."""
        if self.source.test_clock:  # clock rows are input: the bucket runs on them
            return False
        return (
            self.idle_timeout_ms is not None
            or self.processing_time
            or self.source.partition_idle_timeout_ms is not None
            or self.fires_panes_on_clock
        )


#: Reason placeholder the operator replaces by `$mergeObjects`'s message (formatted there).
MERGE_INVALID = "\x00mergeObjects:"
