"""`sluice demo` through the real console script: the service on embedded defaults, a processor
on the sample stream, its output and DLQ records shown as they arrive (JSON lines with
`--json`, else a table), a closing summary, never a stack trace."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.e2e.service_process import SLUICE, TEST_ENV, clean_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]


SUMMARY = r"summary: (\d+) readings read, (\d+) window results written, (\d+) to the DLQ"


def demo(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**clean_env(), **TEST_ENV, "HOME": str(tmp_path)}
    return subprocess.run(
        [*SLUICE, "demo", *args, "--data-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=360,
        env=env,
    )


def test_demo_prints_windows_and_cleans_up(tmp_path: Path) -> None:
    result = demo(tmp_path, "--json", "--seconds", "15")
    assert result.returncode == 0, result.stderr[-2000:]
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    outputs = [m for m in messages if "_dlqMessage" not in m]
    assert outputs, f"no output:\n{result.stderr[-2000:]}"
    assert all("window" in m.get("_stream_meta", {}) for m in outputs)
    assert all({"readings", "avg_watts", "max_temp"} <= set(m) for m in outputs)
    for message in messages:
        if "_dlqMessage" in message:
            assert message["_dlqMessage"]["operatorName"] == "ValidateOperator"
    assert "sluice demo: service at http://127.0.0.1:" in result.stderr
    # It says what it waits for, ends with a summary, and never prints a Python stack trace.
    assert "sluice demo: starting Spark" in result.stderr
    assert "sluice demo: first result after" in result.stderr
    summary = re.search(SUMMARY, result.stderr)
    assert summary, result.stderr[-2000:]
    read, written, dead = (int(n) for n in summary.groups())
    assert read > 0 and written >= len(outputs)
    assert dead >= len(messages) - len(outputs)
    assert "Traceback (most recent call last)" not in result.stderr


def test_demo_shows_a_table_of_window_results_and_dlq_records(tmp_path: Path) -> None:
    result = demo(tmp_path, "--seconds", "12")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback (most recent call last)" not in result.stderr + result.stdout
    header = next((line for line in result.stdout.splitlines() if "avg watts" in line), None)
    assert header is not None, result.stdout[-3000:]
    for column in ("kind", "window", "group", "readings", "max temp", "DLQ reason"):
        assert column in header
    title = re.search(r"sluice demo: (\d+) window results, (\d+) DLQ records", result.stdout)
    assert title, result.stdout[-3000:]
    results, dead = (int(n) for n in title.groups())
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ result")]
    assert results > 0 and rows, result.stdout[-3000:]
    assert len(rows) <= min(results, 20)  # the newest 20 messages at most
    # Each result row shows its window as HH:MM:SS–HH:MM:SS.
    assert all(re.search(r"\d\d:\d\d:\d\d–\d\d:\d\d:\d\d", row) for row in rows)
    assert not any(line.lstrip().startswith("{") for line in result.stdout.splitlines())
    summary = re.search(SUMMARY, result.stderr)
    assert summary, result.stderr[-2000:]
    read, written, to_dlq = (int(n) for n in summary.groups())
    assert read > 0 and written >= results and to_dlq >= dead
