"""The window operator's input rows, as the compiled query ships them to it: what the unit
tests and the operator benchmarks feed `runtime.operator`'s function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from pipeline_stages._windowing.runtime import config as C


def operator_rows(
    first_seq: int,
    event_ms: Sequence[int],
    keys: Sequence[str],
    *,
    parts: Sequence[int] | None = None,
    partition_keys: bool = False,
    values: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Healthy documents arriving from source position `first_seq` on, with these event times
    and `$group` keys (JSON-quoted here); `partition_keys` also sets the key sessions and
    sliding windows partition by; `values` adds shipped value columns (`C.ValueColumns`)."""
    n = len(event_ms)
    nothing = [None] * n
    columns: dict[str, Any] = {
        "part": pd.Series(list(parts) if parts else [0] * n, dtype="int32"),
        "seq": range(first_seq, first_seq + n),
        "sub": [0] * n,
        C.DOC_SUB: [0] * n,
        "event_ms": list(event_ms),
        C.FLAG: pd.Series([C.FLAG_OK] * n, dtype="int8"),
        C.ORIG: nothing,
        C.FDOC: nothing,
        C.FMETA: nothing,
        C.REASON: nothing,
        C.OPERATOR: nothing,
        C.KEY: [f'"{k}"' for k in keys],
    }
    if partition_keys:
        columns[C.PKEY] = columns[C.KEY]
    columns.update(values or {})
    return pd.DataFrame(columns)
