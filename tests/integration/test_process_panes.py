"""`sluice process` (in process, on the shared session) waits for the `every` panes of a
finite input: the run ends once no pane is due, not as soon as the input is exhausted."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from service.runtime.process import run_process

pytestmark = pytest.mark.spark


def test_the_every_pane_of_the_last_documents_fires_before_the_run_ends(spark: Any) -> None:
    pipeline = [
        {
            "$source": {
                "documents": [
                    {"id": 1, "ts": "2024-01-01T00:00:01Z"},
                    {"id": 2, "ts": "2024-01-01T00:00:02Z"},
                ],
                "timeField": {"$dateFromString": {"dateString": "$ts"}},
            }
        },
        {
            # No idleTimeout: the window never closes (no flush at the end of input), so the
            # EARLY pane, 1 s of processing time after the documents, is all there is.
            "$tumblingWindow": {
                "interval": {"size": 60, "unit": "second"},
                "trigger": {"early": {"every": {"size": 1, "unit": "second"}}},
                "pipeline": [{"$group": {"_id": None, "ids": {"$push": "$id"}}}],
            }
        },
    ]
    out, err = io.StringIO(), io.StringIO()
    code = run_process(pipeline, out=out, err=err, max_seconds=120, spark_factory=lambda: spark)
    assert code == 0, err.getvalue()
    assert "warning" not in err.getvalue()  # it ended by itself, not at --max-seconds
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["ids"], d["_stream_meta"]["window"]["pane"]) for d in lines] == [
        ([1, 2], {"index": 0, "timing": "EARLY"})
    ]


def test_a_global_window_prints_its_panes_without_a_start_or_end(spark: Any) -> None:
    docs = [{"k": "a", "v": v, "ts": f"2024-01-01T00:00:0{v}Z"} for v in range(1, 6)]
    pipeline = [
        {
            "$source": {
                "documents": docs,
                "timeField": {"$dateFromString": {"dateString": "$ts"}},
                "config": {"batchSize": 2},
            }
        },
        {
            "$globalWindow": {
                "trigger": {"early": {"count": 2}},
                "accumulationMode": "discarding",
                "pipeline": [{"$group": {"_id": "$k", "total": {"$sum": "$v"}}}],
            }
        },
    ]
    out, err = io.StringIO(), io.StringIO()
    code = run_process(pipeline, out=out, err=err, max_seconds=120, spark_factory=lambda: spark)
    assert code == 0, err.getvalue()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    # Panes of 2 documents each (discarding); the 5th document waits for a 6th, for ever.
    assert [(d["total"], d["_stream_meta"]["window"]) for d in lines] == [
        (3, {"pane": {"index": 0, "timing": "EARLY"}}),
        (7, {"pane": {"index": 1, "timing": "EARLY"}}),
    ]


def test_the_docs_panes_example_prints_what_the_docs_show(spark: Any) -> None:
    """docs/content/windows.md's panes example: its pipeline through `sluice process` (in
    process) prints the lines the page shows."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "content" / "windows.md").read_text()
    section = page.split("### Example: early panes, a filter after `$group`, and retractions")[1]
    pipeline = json.loads(section.split("```json\n")[1].split("```")[0])
    shown = section.split("```jsonl\n")[1].split("```")[0].splitlines()
    out, err = io.StringIO(), io.StringIO()
    code = run_process(pipeline, out=out, err=err, max_seconds=120, spark_factory=lambda: spark)
    assert code == 0, err.getvalue()
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        json.loads(line) for line in shown
    ]
