"""The inner pipeline's blocking part as the operator runs it: admit rows, emit at close.

A window's content is either a dict of `$group` groups (see `GroupRuntime`) or a list of
buffered `(order, ident, document JSON)` items (pass-through windows and windows whose first
blocking stage is `$sort`). `admit` adds admitted rows to their windows; `emit` turns a
closed window's content into result envelopes, running the blocking stages in Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from pipeline_stages._documents.values import MISSING, MqlError, sort_key
from pipeline_stages._stream.json_text import prefer_double
from pipeline_stages._windowing.runtime import config as C
from pipeline_stages._windowing.runtime.blocking import (
    GroupRuntime,
    Output,
    buffered_outputs,
    run_later,
    sort_outputs,
)
from pipeline_stages._windowing.runtime.config import MERGE_INVALID
from pipeline_stages._windowing.runtime.emit import Emitter, Segment
from pipeline_stages._windowing.runtime.group_partials import first_per_group, partials
from pipeline_stages._windowing.runtime.values import (
    decode_column,
    decode_json,
    encode,
    window_meta,
    with_window,
)


class InnerRuntime:
    """Admission and emission for one operator (see the module docstring)."""

    def __init__(self, spec: C.OperatorSpec, out: Emitter | None = None) -> None:
        self.spec = spec
        self.inner = spec.inner
        self.group = GroupRuntime(spec.inner.group) if spec.inner.group is not None else None
        self.out = out
        #: When a set, `(window start, normalised key)` of every `$group` group a batch
        #: folds into (the batch engine saves only those: `batch.state`).
        self.touched: set[tuple[int, Any]] | None = None

    def bind(self, out: Emitter) -> InnerRuntime:
        """Attach the emitter results go to."""
        self.out = out
        return self

    def new_content(self) -> Any:
        """An empty window content."""
        return {} if self.group is not None else []

    # ------------------------------------------------------------------ admission

    def keys(self, df: pd.DataFrame, rows: npt.NDArray[np.int64]) -> tuple[list[Any], list[Any]]:
        """Group key values and their normalised forms (BSON equality) for `rows`."""
        codes, values, norms = self.distinct_keys(df, rows)
        return [values[c] for c in codes], [norms[c] for c in codes]

    @staticmethod
    def distinct_keys(
        df: pd.DataFrame, rows: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.int64], list[Any], list[Any]]:
        """`(code per row, distinct key values, their normalised forms)` for `rows`."""
        codes, uniques = pd.factorize(df[C.KEY].to_numpy()[rows])
        values = [decode_json(text) for text in uniques]
        values = [None if v is MISSING else v for v in values]
        return codes, values, [sort_key(v) for v in values]

    def inputs(self, df: pd.DataFrame, rows: npt.NDArray[np.int64]) -> list[list[list[Any]]]:
        """Per row, per accumulator, the decoded input values."""
        if self.group is None:
            return []
        per_acc = []
        for plan in self.group.plan.accumulators:
            per_acc.append([decode_column(df, vc, rows) for vc in plan.inputs])
        return [
            [[column[i] for column in acc_columns] for acc_columns in per_acc]
            for i in range(len(rows))
        ]

    def admit(
        self,
        windows: dict[Any, Any],
        seg: Segment,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
    ) -> None:
        """Add admitted rows (`rows[i]` into window `starts[i]` with arrival `orders[i]`)."""
        if not len(rows):
            return
        if self.group is None:
            texts = seg.df[C.DOCJ].to_numpy()[rows]
            for i, r in enumerate(rows.tolist()):
                ident = f"{seg.part[r]}:{seg.seq[r]}:{seg.sub[r]}"
                windows[int(starts[i])].append((int(orders[i]), ident, texts[i]))
            return
        self._fold_groups(windows, seg.df, rows, starts, orders)

    def _fold_groups(
        self,
        windows: dict[Any, Any],
        df: pd.DataFrame,
        rows: npt.NDArray[np.int64],
        starts: npt.NDArray[np.int64],
        orders: npt.NDArray[np.int64],
    ) -> None:
        """Fold a batch's items group by group (`runtime.group_partials`), then merge into the windows."""
        group = self.group
        assert group is not None  # noqa: S101 - only called in $group mode
        codes, values, norms = self.distinct_keys(df, rows)
        norm_ids: dict[Any, int] = {}
        # Texts of equal keys (`1` and `1.0`) share one id.
        per_code = np.array([norm_ids.setdefault(norm, len(norm_ids)) for norm in norms])
        window_ids, window_starts = pd.factorize(starts)
        g, _ = pd.factorize(window_ids.astype(np.int64) * len(norm_ids) + per_code[codes])
        n = int(g.max()) + 1
        first = first_per_group(g, [orders])
        memo: dict[Any, Any] = {}
        states = [
            partials(acc, plan, df, rows, g, n, orders, memo)
            for acc, plan in zip(group.accs, group.plan.accumulators, strict=True)
        ]
        touched = self.touched
        for gid, item in enumerate(first[np.argsort(g[first])].tolist()):
            code = int(codes[item])
            entry = [int(orders[item]), values[code], [column[gid] for column in states]]
            start = int(window_starts[window_ids[item]])
            group.merge_into(windows[start], norms[code], entry)
            if touched is not None:
                touched.add((start, norms[code]))

    def failure_reason(self, seg: Segment, row: int, reason: str) -> str:
        """The DLQ reason of a failed row (formats `$mergeObjects`'s placeholder)."""
        if not reason.startswith(MERGE_INVALID) or self.group is None:
            return reason
        index = int(reason[len(MERGE_INVALID) :])
        plan = self.group.plan.accumulators[index]
        value = decode_column(seg.df, plan.inputs[0], np.array([row]))[0]
        try:
            self.group.accs[index].validate(value)
        except MqlError as error:
            return f"Failed to process input document in {C.GROUP_OPERATOR} with error: {error}"
        return reason  # unreachable: the native check and `validate` agree

    def with_window(
        self, doc: str | None, meta: str | None, window: dict[str, Any]
    ) -> tuple[str | None, str | None]:
        """A failed document and its `_stream_meta` as the window's inner stages saw them
        (with the window), for a DLQ record written where the window was not shipped."""
        field = self.spec.source.meta_field
        decoded = decode_json(doc) if doc is not None else None
        if not field or not isinstance(decoded, dict):
            return doc, meta
        decoded = with_window(decoded, field, window)
        return encode(decoded), encode(decoded[field])

    # ------------------------------------------------------------------ emission

    def outputs(self, content: Any, window: dict[str, Any], *, inject: bool) -> list[Output]:
        """A closed window's result documents (after the Python blocking stages)."""
        source = self.spec.source
        if self.group is not None:
            outs = self.group.outputs(content, window=window, source=source)
        else:
            outs = buffered_outputs(content, window=window if inject else None, source=source)
            if self.inner.sort is not None:
                outs = sort_outputs(outs, self.inner.sort)
        return run_later(outs, self.inner.later, window=window, source=source)

    def emit(
        self,
        content: Any,
        *,
        start: int,
        end: int,
        part: int,
        seq: int,
        partition: Any = MISSING,
        inject: bool = False,
        key_prefix: str = "",
        pane: dict[str, Any] | None = None,
    ) -> None:
        """Emit a closed window's results as envelopes (keys prefixed by `key_prefix`); with
        `pane` (`{index, timing}`), one pane of the window, stamped in its window metadata."""
        if self.out is None:
            raise RuntimeError("InnerRuntime.emit needs an emitter (bind)")
        window = window_meta(start, end, partition)
        if pane is not None:
            window["pane"] = pane
            inject = True  # buffered documents hold the window without its pane
        meta = encode({"source": {"type": self.spec.source.source_type}, "window": window})
        if self.group is None and not inject and self.inner.sort is None and not self.inner.later:
            # Pass-through: the documents already hold the window; skip decoding them.
            for _, ident, text in sorted(content, key=lambda item: item[0]):
                self.out.result(
                    part=part, seq=seq, start=start, end=end, key=key_prefix + ident,
                    doc=prefer_double(text), meta=meta,
                )  # fmt: skip
            return
        if self.group is not None and not self.inner.later:
            texts = self.group.output_texts(
                content, window=window, meta_text=meta, source=self.spec.source
            )
        else:
            texts = [(k, encode(d)) for k, d in self.outputs(content, window, inject=inject)]
        for key, text in texts:
            self.out.result(
                part=part, seq=seq, start=start, end=end, key=key_prefix + key, doc=text,
                meta=meta,
            )  # fmt: skip
