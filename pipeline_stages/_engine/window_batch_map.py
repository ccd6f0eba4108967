"""The batch window engine's map side: one Python call per input partition of a micro-batch.

The driver has already decided, per source position, the `minWindowStartTime` in force when
each document arrived (`window_batch`). With it, lateness is known here, where the rows are,
so each partition does what the operator does for its documents (`FixedWindows.enter`): late
records and in-window failures become DLQ envelopes, and admitted documents fold into
partial `$group` states per (window, group key) with the operator's own vectorised folds.
Only those partials and envelopes go to the driver, as one pickled blob per partition.

Arrival orders are `seq << ORDER_BITS` plus the row's rank within its source position, so
partials of different partitions and micro-batches merge in arrival order
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
class MinOpenSteps:
    """`minWindowStartTime` per source position as a step function of `seq`: from
    `seqs[i]` on (until the next step) it is `values[i]`. Single-partition sources only."""

    seqs: tuple[int, ...]
    values: tuple[int, ...]

    def at(self, seq: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The value in force at each of `seq`."""
        index = np.searchsorted(np.asarray(self.seqs, dtype=np.int64), seq, side="right") - 1
        return np.asarray(self.values, dtype=np.int64)[np.maximum(index, 0)]


@dataclass(frozen=True)
class Partial:
    """What one partition hands the driver (unpickled from its blob)."""

    first_seq: int
    #: Open windows the partition's documents entered: start -> partial content.
    windows: dict[int, Any]
    #: DLQ envelope rows (`window_emit.ENVELOPE_COLUMNS`).
    envelopes: list[tuple[Any, ...]]


def arrival_orders(seg: Segment) -> npt.NDArray[np.int64]:
    """Each row's arrival order (see the module docstring)."""
    rank = np.arange(len(seg), dtype=np.int64) - seg.pos_rows[seg.pos]
    if len(rank) and int(rank.max()) >= 1 << ORDER_BITS:
        raise ValueError(f"more than 2**{ORDER_BITS} rows from one source record")
    return (seg.seq << ORDER_BITS) + rank


def partial_of(
    frames: list[pd.DataFrame], spec: C.OperatorSpec, steps: MinOpenSteps
) -> Partial | None:
    """Late records, failures and folded partials of one partition's rows (any order; None
    when only test-clock rows came, which carry no document)."""
    df = sort_rows(frames)
    df = df[df[C.FLAG].to_numpy() != C.FLAG_CLOCK].reset_index(drop=True)
    if not len(df):
        return None
    seg = Segment.of(df, 0)
    out = Emitter(spec.source)
    core = FixedWindows(spec, FixedState(), Clock(), out)
    seg.emit_failed_before(out)
    rows = np.flatnonzero(np.isin(seg.flag, C.ENTERED))
    if len(rows):
        core.enter(seg, rows, steps.at(seg.seq[rows]), arrival_orders(seg)[rows])
    return Partial(int(seg.seq[0]), core.state.windows, out.rows)


def map_partitions(
    spec: C.OperatorSpec, steps: MinOpenSteps
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The function for `mapInPandas` (output schema `BLOB_SCHEMA`)."""

    def run(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        frames = [chunk for chunk in chunks if len(chunk)]
        partial = partial_of(frames, spec, steps) if frames else None
        if partial is not None:
            yield pd.DataFrame({"blob": [pickle.dumps(partial, protocol=pickle.HIGHEST_PROTOCOL)]})

    return run
