"""A processor's counts, persisted with the micro-batch they count, idempotent per batch id.

Spark replays a micro-batch after a crash (the last one planned and not committed), with the
same id and the same input, and the sinks overwrite what the first attempt wrote. The counts
of a batch must behave the same way: a replay replaces them, it never adds them again. So a
ledger keeps the counts of the last batch recorded apart from the totals of every batch before
it, keyed by `(checkpoint generation, batch id)`:

* the same key again (a replay) replaces the last batch's counts;
* a later key folds the last batch into the totals and becomes the last batch;
* an earlier key is ignored: that batch was folded in already (batches are recorded in
  order, and only the last one can be replayed).

The counts are recorded in the same micro-batch as its writes, before Spark commits the batch
(`LiveStats.record_batch`), so after `kill -9` a batch is either counted and committed, counted
and replayed (replaced), or neither and replayed: never lost, never counted twice.

Counts travel in *lanes*, each with its own last batch: `batches` holds what the batch writer
saw (documents, DLQ records, and the source's records read when the engine passes them along
with the batch); `progress` holds the records read as Spark's progress reports them, used only
where the batch did not carry them (an engine without them).

`generation` starts at 1 and batch ids at 0; a fresh checkpoint (`resumeFromCheckpoint:
false`) moves to the next generation, whose batch ids start at 0 again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline_stages._enrichment.operator_stats import add_operators

#: Atlas's cumulative counters (`stats`), in their order.
COUNTERS = (
    "inputMessageCount",
    "inputMessageSize",
    "outputMessageCount",
    "outputMessageSize",
    "dlqMessageCount",
    "dlqMessageSize",
)
#: `$throttle`'s cumulative counters (Atlas's `throttle.throttledTimeMs` and
#: `throttle.throttleEvents`), kept beside Atlas's top-level ones.
THROTTLE_COUNTERS = ("throttledTimeMs", "throttleEvents")
#: Per-operator DLQ counts inside a counts document: `{operator: [count, size]}`.
OPERATOR_DLQ = "operatorDlq"
#: Per-operator stats of the enrichment stages inside a counts document:
#: `{operator: {counters, "latencyBuckets": [...]}}` (`pipeline_stages._enrichment.operator_stats`).
OPERATOR_STATS = "operatorStats"
#: DLQ counts by `errInfo.reason` inside a counts document: `{reason: [count, size]}`.
REASON_DLQ = "reasonDlq"
_BREAKDOWNS = (OPERATOR_DLQ, REASON_DLQ)
#: What the batch writer records.
LANE_BATCHES = "batches"
#: What Spark's progress reports record (input only, when batches do not carry it).
LANE_PROGRESS = "progress"

Counts = dict[str, Any]


def add_counts(left: Mapping[str, Any], right: Mapping[str, Any]) -> Counts:
    """`left + right`, counter by counter, operator by operator and reason by reason."""
    out: Counts = {
        name: int(left.get(name, 0) or 0) + int(right.get(name, 0) or 0)
        for name in (*COUNTERS, *THROTTLE_COUNTERS)
    }
    for breakdown in _BREAKDOWNS:
        keyed: dict[str, list[int]] = {k: list(v) for k, v in left.get(breakdown, {}).items()}
        for name, (count, size) in right.get(breakdown, {}).items():
            entry = keyed.setdefault(name, [0, 0])
            entry[0] += int(count)
            entry[1] += int(size)
        out[breakdown] = keyed
    out[OPERATOR_STATS] = add_operators(
        left.get(OPERATOR_STATS) or {}, right.get(OPERATOR_STATS) or {}
    )
    return out


def counts_of(stored: Mapping[str, Any]) -> Counts:
    """The counters (and per-operator DLQ counts) in a persisted stats document (the
    processor record's `stats`, written before this ledger existed)."""
    out: Counts = {name: int(stored.get(name, 0) or 0) for name in COUNTERS}
    throttle = stored.get("throttle") or {}
    for name in THROTTLE_COUNTERS:
        out[name] = int(throttle.get(name, 0) or 0)
    operators = stored.get("_operatorDlq") or stored.get(OPERATOR_DLQ) or {}
    out[OPERATOR_DLQ] = {k: [int(v[0]), int(v[1])] for k, v in dict(operators).items()}
    reasons = stored.get("_reasonDlq") or {}
    out[REASON_DLQ] = {k: [int(v[0]), int(v[1])] for k, v in dict(reasons).items()}
    out[OPERATOR_STATS] = add_operators({}, stored.get("_operatorStats") or {})
    return out


@dataclass(frozen=True)
class Lane:
    """The last batch recorded in a lane: its key and its counts (only the fields given)."""

    generation: int
    batch_id: int
    counts: Counts

    @property
    def key(self) -> tuple[int, int]:
        """`(generation, batch id)`."""
        return self.generation, self.batch_id


@dataclass(frozen=True)
class StatsLedger:
    """The totals of every batch folded in, plus each lane's last batch (module docstring)."""

    totals: Counts = field(default_factory=lambda: add_counts({}, {}))
    lanes: Mapping[str, Lane] = field(default_factory=dict)

    @classmethod
    def seeded(cls, seed: Mapping[str, Any] | None) -> StatsLedger:
        """An empty ledger starting from `seed` (a persisted stats document), if any."""
        return cls(totals=counts_of(seed or {}))

    def position(self, lane: str) -> tuple[int, int] | None:
        """The key of the lane's last batch (None before any)."""
        last = self.lanes.get(lane)
        return None if last is None else last.key

    def record(
        self, lane: str, generation: int, batch_id: int, part: Mapping[str, Any]
    ) -> StatsLedger | None:
        """The ledger with `part` (some counters, maybe `operatorDlq`) recorded for the batch;
        None when the batch is older than the lane's last one (already folded in)."""
        key = (generation, batch_id)
        last = self.lanes.get(lane)
        totals = self.totals
        if last is None or key > last.key:
            if last is not None:
                totals = add_counts(totals, last.counts)
            counts = dict(part)
        elif key == last.key:
            counts = {**last.counts, **part}  # a replay: its counts replace the first attempt's
        else:
            return None
        lanes = {**self.lanes, lane: Lane(generation, batch_id, counts)}
        return StatsLedger(totals=totals, lanes=lanes)

    def current(self) -> Counts:
        """Every batch's counts: the totals plus each lane's last batch."""
        out = self.totals
        for last in self.lanes.values():
            out = add_counts(out, last.counts)
        return out

    # ------------------------------------------------------------------ storage form

    def to_json(self) -> str:
        """The stored form (JSON text)."""
        return json.dumps(
            {
                "totals": self.totals,
                "lanes": {
                    name: {"generation": n.generation, "batchId": n.batch_id, "counts": n.counts}
                    for name, n in self.lanes.items()
                },
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> StatsLedger:
        """Read the stored form."""
        doc = json.loads(text)
        lanes = {
            name: Lane(int(n["generation"]), int(n["batchId"]), dict(n["counts"]))
            for name, n in dict(doc.get("lanes", {})).items()
        }
        return cls(totals=add_counts(doc.get("totals", {}), {}), lanes=lanes)
