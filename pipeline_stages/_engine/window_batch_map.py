"""The batch window engine's map side: one Python call per micro-batch, where the rows are.

The driver hands over its state's clock and `minWindowStartTime`; the call does what the
window operator does for a segment of input, short of closing windows: it runs the clock over
the batch in arrival order (`Clock.running`: the watermark before and after every source
position), and admits the documents with `FixedWindows.enter` into *partial* windows: late
records and in-window failures become DLQ envelopes, admitted documents fold into partial
`$group` states per (window, group key) with the operator's own vectorised folds. It hands
the driver those partials, the envelopes, the advanced clock, and where the watermark crossed
window ends (`CloseSteps`), pickled in one blob. The driver merges and closes
(`window_batch`).

Arrival orders are `seq << ORDER_BITS` plus the row's rank within its source position, so
partials merge into the driver's windows in arrival order across micro-batches
(`GroupRuntime.merge_into` keeps the earliest order).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pipeline_stages._engine import window_config as C
from pipeline_stages._engine.window_clock import Clock
from pipeline_stages._engine.window_emit import Emitter, Segment
from pipeline_stages._engine.window_fixed import FixedState, FixedWindows
from pipeline_stages._engine.window_operator import sort_rows

#: Bits of an arrival order below the source position (rows of one position).
ORDER_BITS = 20
BLOB_SCHEMA = "blob BINARY"


@dataclass(frozen=True)
class CloseSteps:
    """The batch's watermark minus allowedLateness (`adjusted`) at the positions where it
    entered a new hop cell, and at the last position: enough to attribute every window the
    batch closes to the position that closed it (`FixedWindows.close_due`), as the operator
    does with every position. Ends lie on cell boundaries, so the first position whose
    `adjusted` reaches an end always starts a cell."""

    seqs: npt.NDArray[np.int64]
    parts: npt.NDArray[np.int64]
    adjusted: npt.NDArray[np.int64]

    def segment(self) -> Segment:
        """A segment of just these positions, for `close_due`."""
        df = pd.DataFrame({"part": self.parts, "seq": self.seqs})
        df[C.FLAG] = np.int8(C.FLAG_TICK)
        df["sub"] = np.int64(0)
        df["event_ms"] = np.int64(0)
        return Segment.of(df, 0)


@dataclass(frozen=True)
class Partial:
    """What the map side hands the driver (unpickled from its blob)."""

    clock: Clock
    #: Open windows the batch's documents entered: start -> partial content.
    windows: dict[int, Any]
    #: DLQ envelope rows (`window_emit.ENVELOPE_COLUMNS`).
    envelopes: list[tuple[Any, ...]]
    steps: CloseSteps
    rows: int


def arrival_orders(seg: Segment) -> npt.NDArray[np.int64]:
    """Each row's arrival order (see the module docstring)."""
    rank = np.arange(len(seg), dtype=np.int64) - seg.pos_rows[seg.pos]
    if len(rank) and int(rank.max()) >= 1 << ORDER_BITS:
        raise ValueError(f"more than 2**{ORDER_BITS} rows from one source record")
    return (seg.seq << ORDER_BITS) + rank


def close_steps(
    seg: Segment, adjusted: npt.NDArray[np.int64], geometry: C.FixedGeometry
) -> CloseSteps:
    """`CloseSteps` of a segment's per-position `adjusted` watermark."""
    base = geometry.offset_ms + geometry.interval_ms  # window ends are base + k * hop
    cell = np.floor_divide(adjusted - base, geometry.hop_ms)
    keep = np.r_[True, cell[1:] != cell[:-1]]
    keep[-1] = True
    rows = seg.pos_rows[keep]
    return CloseSteps(seg.seq[rows], seg.part[rows], adjusted[keep])


def partial_of(
    frames: list[pd.DataFrame], spec: C.OperatorSpec, clock: Clock, min_open: int, now: int
) -> Partial | None:
    """The batch's partial (None when only test-clock rows came, which carry no document).

    Mirrors `window_operator.run_segment` and `FixedWindows.segment` up to closing."""
    df = sort_rows(frames)
    df = df[df[C.FLAG].to_numpy() != C.FLAG_CLOCK].reset_index(drop=True)
    if not len(df):
        return None
    seg = Segment.of(df, now)
    out = Emitter(spec.source)
    core = FixedWindows(spec, FixedState(min_open=min_open), clock, out)
    clock.start(now, spec.source.partitions)
    clock.last_input_ms = now
    first = seg.pos_rows
    counted = seg.flag[first] != C.FLAG_SOURCE_FAILED
    before, after = clock.running(seg.part[first], seg.ts[first], counted, None)
    seg.emit_failed_before(out)
    rows = np.flatnonzero(np.isin(seg.flag, C.ENTERED))
    if len(rows):
        adjusted = before[seg.pos[rows]] - spec.allowed_lateness_ms
        min_opens = np.maximum.accumulate(np.maximum(core.oldest_start(adjusted), min_open))
        core.enter(seg, rows, min_opens, arrival_orders(seg)[rows])
    clock.last_seq, clock.last_part = int(seg.seq[first[-1]]), int(seg.part[first[-1]])
    assert isinstance(spec.geometry, C.FixedGeometry)  # noqa: S101 - `ineligible` checked
    steps = close_steps(seg, after - spec.allowed_lateness_ms, spec.geometry)
    return Partial(clock, core.state.windows, out.rows, steps, len(seg))


def map_batch(
    spec: C.OperatorSpec, clock: Clock, min_open: int, now: int
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The function for `mapInPandas` over the batch in one partition (`BLOB_SCHEMA`)."""

    def run(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [chunk for chunk in chunks if len(chunk)]
        partial = partial_of(frames, spec, clock, min_open, now) if frames else None
        if partial is not None:
            yield pd.DataFrame({"blob": [pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL)]})

    return run
