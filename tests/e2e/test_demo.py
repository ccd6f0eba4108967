"""`sluice demo` through the real console script: the service on embedded defaults, a processor
on the sample stream, its output and DLQ records printed as they arrive."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.e2e.service_process import SLUICE, TEST_ENV, clean_env

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_prints_windows_or_documents_and_cleans_up(tmp_path: pytest.TempPathFactory) -> None:
    env = {**clean_env(), **TEST_ENV, "HOME": str(tmp_path)}
    result = subprocess.run(
        [*SLUICE, "demo", "--seconds", "45", "--data-dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    messages = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    outputs = [m for m in messages if "_dlqMessage" not in m]
    assert outputs, f"no output in 45 s:\n{result.stderr[-2000:]}"
    windowed = "window" in outputs[0].get("_stream_meta", {})
    if windowed:
        assert {"readings", "avg_watts", "max_temp"} <= set(outputs[0])
    else:
        assert {"device_id", "load"} <= set(outputs[0])
    for message in messages:
        if "_dlqMessage" in message:
            assert message["_dlqMessage"]["operatorName"] == "ValidateOperator"
    assert "sluice demo: service at http://127.0.0.1:" in result.stderr
