"""What session and sliding windows share: per-partition state and buffered members.

Session and sliding windows are defined per `partitionBy` value and only known when they
close, so their members are buffered (`Member`: a document's admitted item, or its inner
error) and the inner pipeline's blocking part runs at close over the members in arrival order,
as the reference model does. Inner errors are DLQ'd at close too, once per window holding the
document.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pipeline_stages._documents.values import MISSING, sort_key
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.blocking import fold, key_text
from pipeline_stages._windowing.runtime.emit import Emitter, Segment, late_meta
from pipeline_stages._windowing.runtime.inner import InnerRuntime
from pipeline_stages._windowing.runtime.values import decode_json, window_meta


@dataclass
class Member:
    """One row of a document inside a session/sliding window.

    `item` is what `InnerRuntime` admits (`(norm, key, inputs)` for `$group`, `(ident, text)`
    for buffered documents), None for a document the inner prefix dropped; `failure` holds the
    DLQ fields of a document the inner per-document part failed.
    """

    t: int
    order: int
    item: Any = None
    failure: tuple[Any, ...] | None = None


@dataclass
class Rows:
    """The entered rows of a segment with their decoded partition keys and payloads."""

    rows: npt.NDArray[np.int64]
    norms: list[Any]
    values: list[Any]
    texts: list[str]
    members: list[Member]


def decode_rows(
    seg: Segment, rows: npt.NDArray[np.int64], inner: InnerRuntime, first_order: int
) -> Rows:
    """Partition keys and members of `rows` (positional), orders from `first_order`."""
    df = seg.df
    codes, uniques = pd.factorize(df[C.PKEY].to_numpy()[rows])
    values = [decode_json(text) for text in uniques]
    values = [None if v is MISSING else v for v in values]
    norms = [sort_key(v) for v in values]
    texts = list(uniques)
    members = [Member(int(seg.ts[r]), first_order + i) for i, r in enumerate(rows.tolist())]
    flags = seg.flag[rows]
    ok = np.flatnonzero(flags == C.FLAG_OK)
    if len(ok):
        if inner.group is not None:
            keys, key_norms = inner.keys(df, rows[ok])
            inputs = inner.inputs(df, rows[ok])
            for n, i in enumerate(ok.tolist()):
                members[i].item = (key_norms[n], keys[n], inputs[n])
        else:
            docs = df[C.DOCJ].to_numpy()
            for i in ok.tolist():
                r = int(rows[i])
                members[i].item = (f"{seg.part[r]}:{seg.seq[r]}:{seg.sub[r]}", docs[r])
    for i in np.flatnonzero(flags == C.FLAG_FAILED_INSIDE).tolist():
        r = int(rows[i])
        native_reason = df[C.REASON].iat[r]
        if not isinstance(native_reason, str):
            raise TypeError(f"a failed row without a reason (row {r}): {native_reason!r}")
        reason = inner.failure_reason(seg, r, native_reason)
        members[i].failure = (
            int(seg.part[r]), int(seg.seq[r]), int(seg.sub[r]), int(seg.ts[r]),
            df[C.FDOC].iat[r], df[C.FMETA].iat[r], reason, df[C.OPERATOR].iat[r],
        )  # fmt: skip
    return Rows(
        rows=rows,
        norms=[norms[c] for c in codes],
        values=[values[c] for c in codes],
        texts=[texts[c] for c in codes],
        members=members,
    )


class LateOnce:
    """Emits one late-document DLQ record per document (rows of one document share it)."""

    def __init__(self, seg: Segment, out: Emitter, spec: C.OperatorSpec) -> None:
        self.seg, self.out, self.spec = seg, out, spec
        self.orig = seg.df[C.ORIG].to_numpy()
        self.doc_sub = seg.df[C.DOC_SUB].to_numpy()
        self.seen: set[tuple[int, int, int]] = set()

    def __call__(self, r: int, missed: list[int] | None) -> None:
        """DLQ row `r`'s document as late (unless already done or there is no DLQ)."""
        seg = self.seg
        ident = (int(seg.seq[r]), int(seg.part[r]), int(self.doc_sub[r]))
        if ident in self.seen or self.orig[r] is None:
            return
        self.seen.add(ident)
        doc = seg.doc_text(self.orig[r])
        self.out.dlq(
            part=int(seg.part[r]), seq=int(seg.seq[r]), sub=int(seg.sub[r]), event_ms=int(seg.ts[r]),
            doc=doc, meta=late_meta(doc, self.spec.source),
            reason=C.LATE_REASON, operator=self.spec.inner.first_operator, missed=missed,
        )  # fmt: skip


def emit_members(
    inner: InnerRuntime,
    out: Emitter,
    members: list[Member],
    *,
    start: int,
    end: int,
    partition: Any,
    partition_text: str,
    position: tuple[int, int],
) -> None:
    """Run a closed window over its members: inner errors to the DLQ, then the results."""
    ordered = sorted(members, key=lambda m: m.order)
    window = window_meta(start, end, partition)
    for member in ordered:
        if member.failure is not None:
            dead_letter(inner, out, member.failure, window, window_start=start, at=position)
    part, seq = position[1], position[0]
    inner.emit(
        member_content(inner, ordered), start=start, end=end, part=part, seq=seq,
        partition=partition, inject=True, key_prefix=f"{partition_text}|",
    )  # fmt: skip


def dead_letter(
    inner: InnerRuntime,
    out: Emitter,
    failure: tuple[Any, ...],
    window: dict[str, Any],
    **where: Any,
) -> None:
    """A member's inner failure (`Member.failure`) to the DLQ, its window's metadata
    (`window`) on the document; `where`: the envelope's position (`Emitter.dlq`)."""
    part, seq, sub, ts, doc, meta, reason, operator = failure
    doc, meta = inner.with_window(doc, meta, window)
    out.dlq(
        part=part, seq=seq, sub=sub, event_ms=ts, doc=doc, meta=meta, reason=reason,
        operator=operator, **where,
    )  # fmt: skip


def member_content(inner: InnerRuntime, members: list[Member]) -> Any:
    """The window content (`InnerRuntime.new_content`'s shape) of `members`, folded in
    arrival order."""
    items = sorted((m for m in members if m.item is not None), key=lambda m: m.order)
    if inner.group is not None:
        content: Any = {}
        fold(inner.group, content, [(m.order, *m.item) for m in items])
        return content
    return [(m.order, *m.item) for m in items]


def close_position(
    seg: Segment | None, adjusted_after: Any, end: int, fallback: tuple[int, int]
) -> tuple[int, int]:
    """`(seq, part)` of the position whose watermark closed a window ending at `end`."""
    if seg is None or not len(adjusted_after):
        return fallback
    at = min(int(np.searchsorted(adjusted_after, end, side="left")), len(seg.pos_rows) - 1)
    r = int(seg.pos_rows[at])
    return int(seg.seq[r]), int(seg.part[r])


__all__ = [
    "Member",
    "Rows",
    "LateOnce",
    "close_position",
    "dead_letter",
    "decode_rows",
    "emit_members",
    "key_text",
    "member_content",
]
