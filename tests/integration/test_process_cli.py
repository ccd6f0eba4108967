"""`sluice process` through the real console script (a subprocess with its own JVM).

Each run starts a JVM (10-30 s here), so this file keeps to a few runs that check what only
the real command shows: argument handling, stdout/stderr separation, exit codes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SLUICE = [
    shutil.which("sluice") or sys.executable,
    *([] if shutil.which("sluice") else ["-m", "service.cli.app"]),
]


def run_sluice(
    *args: str, stdin: str | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JAVA_TOOL_OPTIONS": "-XX:TieredStopAtLevel=1"}
    return subprocess.run(
        [*SLUICE, *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=env
    )


def lines(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_invalid_pipeline_exits_2_with_every_problem_on_stderr() -> None:
    pipeline = [
        {"$source": {"documents": [{"a": 1}]}},
        {"$tumblingWindow": {"interval": {"size": 0, "unit": "second"}, "pipeline": []}},
        {"$matchh": {"a": 1}},
    ]
    result = run_sluice("process", "-", stdin=json.dumps(pipeline), timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    body = json.loads(result.stderr.strip().splitlines()[-1])
    paths = {(p["code"], p["path"]) for p in body["problems"]}
    assert ("unknown_stage", "/pipeline/2") in paths
    assert any(path.startswith("/pipeline/1/$tumblingWindow/interval") for _, path in paths)
    assert "did you mean '$match'" in json.dumps(body)


def test_unreadable_file_exits_2() -> None:
    result = run_sluice("process", "/nonexistent/pipeline.json", timeout=60)
    assert result.returncode == 2
    assert json.loads(result.stderr.strip())["problems"][0]["code"] == "invalid_json"


@pytest.mark.spark
@pytest.mark.slow
def test_stateless_pipeline_prints_results_and_dlq_records_in_order(tmp_path: Path) -> None:
    document = {
        "pipeline": [
            {
                "$source": {
                    "documents": [
                        {"id": 1, "a": 10, "b": 2, "ts": "2024-01-01T00:00:01Z"},
                        {"id": 2, "a": 7, "b": 0, "ts": "2024-01-01T00:00:02Z"},
                        {"id": 3, "a": 1, "b": 1, "ts": "2024-01-01T00:00:03Z"},
                        {"id": 4, "a": 12.5, "b": 5, "ts": "not a date"},
                        {"id": 5, "a": 9.0, "b": 3, "ts": "2024-01-01T00:00:05Z"},
                    ],
                    "timeField": {"$dateFromString": {"dateString": "$ts"}},
                }
            },
            {"$match": {"a": {"$gte": 5}}},
            {"$addFields": {"ratio": {"$divide": ["$a", "$b"]}, "n": {"$add": [1, 2]}}},
            {"$project": {"_id": 0, "id": 1, "ratio": 1, "n": 1, "a": 1, "_ts": 1}},
        ]
    }
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(document))
    result = run_sluice("process", str(path), "--batch-size", "2")
    assert result.returncode == 0, result.stderr
    out = lines(result.stdout)
    assert out[0] == {
        "_ts": {"$date": "2024-01-01T00:00:01.000Z"},
        "a": 10,
        "id": 1,
        "n": 3,
        "ratio": 5.0,
    }
    dlq = out[1]["_dlqMessage"]
    assert dlq["errInfo"]["reason"] == (
        "Failed to process input document in AddFieldsOperator with error: can't $divide by zero"
    )
    assert dlq["operatorName"] == "AddFieldsOperator"
    assert dlq["doc"]["id"] == 2 and dlq["processorName"] == "process"
    assert set(dlq) >= {"_id", "_stream_meta", "errInfo", "operatorName", "doc", "dlqTime"}
    late = out[2]["_dlqMessage"]
    assert late["operatorName"] == "SourceOperator" and late["doc"]["id"] == 4
    assert "not a date" in late["errInfo"]["reason"]
    # 9.0 stays a double and 9.0 / 3 is a double; the int literal sum stays an int.
    assert out[3] == {
        "_ts": {"$date": "2024-01-01T00:00:05.000Z"},
        "a": 9.0,
        "id": 5,
        "n": 3,
        "ratio": 3.0,
    }
    assert isinstance(out[3]["a"], float) and isinstance(out[3]["n"], int)
    assert '"a":9.0' in result.stdout.splitlines()[3]
    assert len(out) == 4
    assert "WARN" not in result.stdout
