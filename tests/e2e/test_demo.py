"""`sluice demo` through the real console script: the service on embedded defaults, a processor
on the sample stream, its output and DLQ records printed as they arrive."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.service_process import SLUICE, TEST_ENV, clean_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_prints_windows_and_cleans_up(tmp_path: pytest.TempPathFactory) -> None:
    env = {**clean_env(), **TEST_ENV, "HOME": str(tmp_path)}
    result = subprocess.run(
        [*SLUICE, "demo", "--seconds", "90", "--data-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=360,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    outputs = [m for m in messages if "_dlqMessage" not in m]
    assert outputs, f"no output in 90 s:\n{result.stderr[-2000:]}"
    assert all("window" in m.get("_stream_meta", {}) for m in outputs)
    assert all({"readings", "avg_watts", "max_temp"} <= set(m) for m in outputs)
    for message in messages:
        if "_dlqMessage" in message:
            assert message["_dlqMessage"]["operatorName"] == "ValidateOperator"
    assert "sluice demo: service at http://127.0.0.1:" in result.stderr
