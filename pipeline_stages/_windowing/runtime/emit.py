"""The operator's output rows (envelopes) and the per-segment view of its input rows."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pipeline_stages._stream.envelope import KIND_DLQ
from pipeline_stages._stream.frame import KIND_OUTPUT, KIND_STATS
from pipeline_stages._stream.json_text import prefer_double
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.values import date_json, decode_json, encode

ENVELOPE_COLUMNS = (
    "kind", "part", "seq", "sub", "event_ms", "doc", "meta", "reason", "operator", "missed",
    "window_start", "window_key",
)  # fmt: skip
#: Window results sort after the DLQ records of the document that closed their window.
RESULT_SUB_BASE = 1 << 50
#: Extra DLQ records of one document (one per open window) get distinct `sub`s.
WINDOW_SUB_STEP = 1 << 40
#: With groups split over buckets, a closed window's results start at `sub` RESULT_SUB_BASE +
#: (its rank among the windows the call closed << GROUP_BITS) in every bucket
#: (`Emitter.begin_window`), so the sink's merge keeps windows in start order. Ranks past
#: `_MAX_WINDOW_RANK` share the last one (a million windows closed in one micro-batch: their
#: results still come out, but windows past it may interleave across buckets).
GROUP_BITS = 30
_MAX_WINDOW_RANK = (1 << (50 - GROUP_BITS)) - 1


@dataclass
class Emitter:
    """Collects envelope rows in emission order."""

    source: C.WindowSource
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    results: int = 0
    dlq_count: int = 0
    #: Orders rows written when a window closes (results, and DLQ records written then).
    closing: int = 0
    #: Windows closed so far in this call (`begin_window`).
    windows_closed: int = 0

    def dlq(
        self,
        *,
        part: int,
        seq: int,
        sub: int,
        event_ms: int,
        doc: str | None,
        meta: str | None,
        reason: str,
        operator: str,
        missed: list[int] | None = None,
        window_start: int | None = None,
        at: tuple[int, int] | None = None,
    ) -> None:
        """One DLQ envelope (`missed`: the `missedWindowStartTimes` of a late document).

        `at` is the `(seq, part)` of the document that closed a window, for records written at
        close: they then sort with that window's results, whatever the batch size.
        """
        missed_json = None if missed is None else json.dumps([date_json(s) for s in missed])
        if at is not None:
            seq, part = at
            sub = RESULT_SUB_BASE + self.closing
            self.closing += 1
        self.dlq_count += 1
        self.rows.append(
            (KIND_DLQ, part, seq, sub, event_ms, doc, meta, reason, operator, missed_json,
             window_start, None)
        )  # fmt: skip

    def result(
        self,
        *,
        part: int,
        seq: int,
        start: int,
        end: int,
        key: str,
        doc: str,
        meta: str,
    ) -> None:
        """One closed-window result document (document and metadata already encoded)."""
        self.rows.append(
            (KIND_OUTPUT, part, seq, RESULT_SUB_BASE + self.closing, end, doc, meta,
             None, None, None, start, key)
        )  # fmt: skip
        self.results += 1
        self.closing += 1

    def begin_window(self) -> None:
        """A window closes and groups are split over buckets: number its results from a `sub`
        every bucket gives that window (each bucket closes the same windows in the same
        order, see `spark.compile._bucketed`), so that windows stay in start order when the
        sink merges the buckets' results. Groups within a window keep each bucket's order;
        across buckets they follow the order the sink reads the buckets in."""
        self.closing = min(self.windows_closed, _MAX_WINDOW_RANK) << GROUP_BITS
        self.windows_closed += 1

    def stats(self, doc: dict[str, Any], *, part: int, seq: int) -> None:
        """The per-batch stats row (`sluice process` reads `openWindows`)."""
        self.rows.append(
            (KIND_STATS, part, seq, RESULT_SUB_BASE * 2, 0, json.dumps(doc), None, None, None,
             None, None, None)
        )  # fmt: skip

    def frame(self) -> pd.DataFrame:
        """The envelope DataFrame (columns of `ENVELOPE_SCHEMA`)."""
        df = pd.DataFrame(self.rows, columns=list(ENVELOPE_COLUMNS))
        for name in ("part",):
            df[name] = df[name].astype("int32")
        for name in ("seq", "sub", "event_ms"):
            df[name] = df[name].astype("int64")
        df["window_start"] = df["window_start"].astype("Int64")
        return df


def late_doc(orig: str | None) -> str | None:
    """The JSON text of a late document from its shipped copy (a `C.ORIG` cell: the operator
    ships `to_json` text, see `spark.compile`), written so that `parse_json` keeps its doubles
    doubles."""
    if orig is None:
        return None
    return prefer_double(orig)


def late_meta(orig: str | None, source: C.WindowSource) -> str:
    """`_stream_meta` of a late document's DLQ record: the document's own, as Atlas copies it."""
    if orig is not None and source.meta_field:
        doc = decode_json(orig)
        meta = doc.get(source.meta_field) if isinstance(doc, dict) else None
        if isinstance(meta, dict):
            return encode(meta)
    return json.dumps({"source": {"type": source.source_type}})


@dataclass
class Segment:
    """The rows of one processing-time segment, sorted in arrival order, as numpy arrays.

    A *position* is a source record `(seq, part)`; `pos` maps each row to its position.
    """

    df: pd.DataFrame
    now: int
    flag: npt.NDArray[np.int8]
    part: npt.NDArray[np.int64]
    seq: npt.NDArray[np.int64]
    sub: npt.NDArray[np.int64]
    ts: npt.NDArray[np.int64]
    pos: npt.NDArray[np.int64]
    pos_rows: npt.NDArray[np.int64]
    #: A late document's JSON text from its `C.ORIG` cell (the engine decides what it ships).
    doc_text: Callable[[Any], str | None] = late_doc

    @classmethod
    def of(
        cls, df: pd.DataFrame, now: int, doc_text: Callable[[Any], str | None] = late_doc
    ) -> Segment:
        """Arrays of a sorted segment DataFrame."""
        part = df["part"].to_numpy(dtype=np.int64)
        seq = df["seq"].to_numpy(dtype=np.int64)
        new = np.ones(len(df), dtype=bool)
        if len(df) > 1:
            new[1:] = (seq[1:] != seq[:-1]) | (part[1:] != part[:-1])
        return cls(
            df=df,
            now=now,
            flag=df[C.FLAG].to_numpy(dtype=np.int8),
            part=part,
            seq=seq,
            sub=df["sub"].to_numpy(dtype=np.int64),
            ts=df["event_ms"].to_numpy(dtype=np.int64),
            pos=np.cumsum(new) - 1,
            pos_rows=np.flatnonzero(new),
            doc_text=doc_text,
        )

    def __len__(self) -> int:
        return len(self.df)

    def emit_failed_before(self, out: Emitter) -> None:
        """Forward the rows that failed before the window to the DLQ, in order."""
        failed = np.flatnonzero(np.isin(self.flag, (C.FLAG_FAILED_BEFORE, C.FLAG_SOURCE_FAILED)))
        if not len(failed):
            return
        docs, metas = self.df[C.FDOC].to_numpy(), self.df[C.FMETA].to_numpy()
        reasons, operators = self.df[C.REASON].to_numpy(), self.df[C.OPERATOR].to_numpy()
        for r in failed.tolist():
            out.dlq(
                part=int(self.part[r]), seq=int(self.seq[r]), sub=int(self.sub[r]),
                event_ms=int(self.ts[r]), doc=docs[r], meta=metas[r], reason=reasons[r],
                operator=operators[r],
            )  # fmt: skip
