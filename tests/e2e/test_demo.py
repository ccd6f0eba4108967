"""`sluice demo` through the real console script: the service on embedded defaults, a processor
on the sample stream, its output and DLQ records printed as they arrive."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from tests.e2e.service_process import SLUICE, TEST_ENV, clean_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_prints_windows_and_cleans_up(tmp_path: pytest.TempPathFactory) -> None:
    env = {**clean_env(), **TEST_ENV, "HOME": str(tmp_path)}
    result = subprocess.run(
        [*SLUICE, "demo", "--seconds", "30", "--data-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=360,
        env=env,
    )
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
    summary = re.search(
        r"summary: (\d+) readings read, (\d+) window results written, (\d+) to the DLQ",
        result.stderr,
    )
    assert summary, result.stderr[-2000:]
    read, written, dead = (int(n) for n in summary.groups())
    assert read > 0 and written >= len(outputs)
    assert dead >= len(messages) - len(outputs)
    assert "Traceback (most recent call last)" not in result.stderr
