"""`sluice process` runs a window pipeline end to end (the real console script, a new JVM).

One pipeline exercises the production path of the window operator: the `documents` source,
processing-time timeouts (no test clock), a late document, a `$group` expression error, and an
`idleTimeout` that closes the last window once the source is exhausted, which is also what
lets the command exit (`_finished` waits for the operator's stats to report no open window).
Expected output is derived by hand from atlas-semantics.md §4 (see the comments). Each run
starts a JVM, so there are only two: one document per micro-batch and one batch for all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._documents.ejson import from_ejson
from tests.conformance.harness import mismatches

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def at(seconds: float) -> str:
    return f"2024-01-01T00:00:{seconds:06.3f}Z"


def window(start: float, end: float) -> dict[str, Any]:
    return {"window": {"start": {"$date": at(start)}, "end": {"$date": at(end)}}}


DOCS = [
    {"id": 1, "v": 1, "ts": at(0.5)},
    {"id": 2, "v": 2, "ts": at(1.5)},
    # W = 2.199 s >= 2 s: [0, 2) closes (allowedLateness 0).
    {"id": 3, "v": 4, "ts": at(2.2)},
    # 1 s is in the closed [0, 2): late.
    {"id": 4, "v": 8, "ts": at(1.0)},
    # 8 / 0 fails in $group: this document alone goes to the DLQ.
    {"id": 5, "v": 0, "ts": at(3.0)},
    # W = 4.999 s: [2, 4) closes; [4, 6) stays open until the source is idle for
    # max(idleTimeout 1 s, 6 - 4.999 s).
    {"id": 6, "v": 4, "ts": at(5.0)},
]
PIPELINE = [
    {"$source": {"documents": DOCS, "timeField": {"$dateFromString": {"dateString": "$ts"}}}},
    {
        "$tumblingWindow": {
            "interval": {"size": 2, "unit": "second"},
            "allowedLateness": 0,
            "idleTimeout": {"size": 1, "unit": "second"},
            "pipeline": [
                {
                    "$group": {
                        "_id": None,
                        "n": {"$count": {}},
                        "total": {"$sum": {"$divide": [8, "$v"]}},
                        "ids": {"$push": "$id"},
                    }
                }
            ],
        }
    },
]
EXPECTED = [
    {"_id": None, "_stream_meta": window(0, 2), "n": 2, "total": 12.0, "ids": [1, 2]},
    {
        "_dlqMessage": {
            "errInfo": {"reason": "Input document arrived late."},
            "operatorName": "GroupOperator",
            "doc": {"id": 4},
            "missedWindowStartTimes": [{"$date": at(0)}],
        }
    },
    {
        "_dlqMessage": {
            "errInfo": {
                "reason": "Failed to process input document in GroupOperator with error: "
                "can't $divide by zero"
            },
            "operatorName": "GroupOperator",
            "doc": {"id": 5},
        }
    },
    {"_id": None, "_stream_meta": window(2, 4), "n": 1, "total": 2.0, "ids": [3]},
    {"_id": None, "_stream_meta": window(4, 6), "n": 1, "total": 2.0, "ids": [6]},
]


def invoke(
    tmp_path: Path, *extra: str, pipeline: Any = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `sluice process` on `pipeline` (default `PIPELINE`) with `env` added."""
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(PIPELINE if pipeline is None else pipeline), encoding="utf-8")
    sluice = shutil.which("sluice")
    assert sluice is not None, "the sluice console script is not installed"
    return subprocess.run(
        [sluice, "process", str(path), "--max-seconds", "240", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1", **(env or {})},
        check=False,
    )


def run_process(
    tmp_path: Path, *extra: str, pipeline: Any = None, env: dict[str, str] | None = None
) -> list[Any]:
    """Run `sluice process`; returns the printed lines, decoded."""
    done = invoke(tmp_path, *extra, pipeline=pipeline, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped after" not in done.stderr, "the run did not finish on its own"
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("batch", ["1", "1000"])
def test_process_emits_windows_dlq_and_exits_after_the_idle_close(
    tmp_path: Path, batch: str
) -> None:
    lines = run_process(tmp_path, "--batch-size", batch)
    assert len(lines) == len(EXPECTED), lines
    for number, (want, got) in enumerate(zip(EXPECTED, lines, strict=True)):
        problems = mismatches(from_ejson(want), from_ejson(got))
        assert not problems, f"line {number}: {problems}: {got}"


ENGINE = "SLUICE_SPARK_CONF_spark__sluice__window__engine"


def without_idle_timeout() -> list[dict[str, Any]]:
    source, window = PIPELINE
    body = {k: v for k, v in window["$tumblingWindow"].items() if k != "idleTimeout"}
    return [source, {"$tumblingWindow": body}]


def test_process_takes_spark_settings_from_the_environment_batch_engine(tmp_path: Path) -> None:
    # Without idleTimeout the batch engine can run the window; [4, 6) then never closes.
    lines = run_process(tmp_path, pipeline=without_idle_timeout(), env={ENGINE: "batch"})
    assert len(lines) == len(EXPECTED) - 1, lines
    for number, (want, got) in enumerate(zip(EXPECTED, lines, strict=False)):
        problems = mismatches(from_ejson(want), from_ejson(got))
        assert not problems, f"line {number}: {problems}: {got}"


def test_process_reports_a_bad_spark_setting_from_the_environment(tmp_path: Path) -> None:
    done = invoke(tmp_path, pipeline=without_idle_timeout(), env={ENGINE: "fast"})
    assert done.returncode == 2, done.stderr[-3000:]
    (problem,) = json.loads(done.stderr.strip().splitlines()[-1])["problems"]
    assert problem["path"] == "/pipeline/1/$tumblingWindow"
    assert "spark.sluice.window.engine" in problem["message"]
    malformed = invoke(tmp_path, env={"SLUICE_SPARK_CONF": "{"})
    assert malformed.returncode == 2
    assert json.loads(malformed.stderr.strip().splitlines()[-1]) == {
        "error": "SLUICE_SPARK_CONF: not valid JSON (Expecting property name enclosed in "
        "double quotes)"
    }
