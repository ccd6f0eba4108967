"""What sinks read of a window pane (issue 25) from an output document's text.

A window with `trigger` stamps `_stream_meta.window.pane: {index, timing[, retraction]}` on
each result. Sinks act on it: `$merge` does not write retractions (the next pane re-emits the
group under the same `_id`), and `$emit` to Kafka puts the pane in headers. The stream
metadata's field is named by the source (`streamMetaFieldName`), so the pane is looked up in
any top-level object holding `window.pane`.
"""

from __future__ import annotations

import json
from typing import Any

#: Kafka headers of a pane's results (`$emit`): its index, timing and whether it retracts.
HEADER_PANE_INDEX = "sluice-pane-index"
HEADER_PANE_TIMING = "sluice-pane-timing"
HEADER_RETRACTION = "sluice-retraction"


def pane_of(doc_json: str) -> dict[str, Any] | None:
    """The output's `window.pane` object, or None for an output of no pane."""
    if '"pane"' not in doc_json:  # the common case, without parsing
        return None
    doc = json.loads(doc_json)
    if not isinstance(doc, dict):
        return None
    for value in doc.values():
        window = value.get("window") if isinstance(value, dict) else None
        pane = window.get("pane") if isinstance(window, dict) else None
        if isinstance(pane, dict):
            return pane
    return None


def is_retraction(doc_json: str) -> bool:
    """Whether an output is a pane's retraction (`window.pane.retraction: true`)."""
    if '"retraction"' not in doc_json:
        return False
    pane = pane_of(doc_json)
    return pane is not None and pane.get("retraction") is True


def pane_headers(doc_json: str) -> list[tuple[str, bytes]]:
    """The Kafka headers of a pane's output (none for an output of no pane)."""
    pane = pane_of(doc_json)
    if pane is None:
        return []
    retraction = pane.get("retraction") is True
    return [
        (HEADER_PANE_INDEX, str(pane.get("index")).encode()),
        (HEADER_PANE_TIMING, str(pane.get("timing")).encode()),
        (HEADER_RETRACTION, b"true" if retraction else b"false"),
    ]
