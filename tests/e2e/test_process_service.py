"""End to end: `sluice process` through a running service (`sluice serve`, real uvicorn, Spark).

The real CLI finds the service as every client command does (here `SLUICE_URL` and the key in
its data directory) and runs the README's window example there as an ephemeral processor:
the same stdout lines as `sluice process --local` prints (DLQ records differ only in their
generated `_id`, their `dlqTime` and the processor's name), the same exit codes. An
ephemeral processor is listed while it runs and disappears when its client is killed.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.service_process import SLUICE, ServiceProcess, clean_env, poll

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
#: Fields of a DLQ record that differ between two runs of the same pipeline.
RUN_FIELDS = ("_id", "dlqTime", "processorName")


def readme_window_example() -> str:
    """The README's `window.json`, as the README shows it."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"\(`window\.json`\):\s*```json\n(.*?)```", readme, re.S)
    assert found, "the README's window example moved"
    return found.group(1)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    running = ServiceProcess(tmp_path_factory.mktemp("process") / "data").start()
    yield running
    running.cleanup()


@pytest.fixture
def window_file(tmp_path: Path) -> Path:
    path = tmp_path / "window.json"
    path.write_text(readme_window_example(), encoding="utf-8")
    return path


def comparable(line: str) -> Any:
    """A printed line without what differs between runs."""
    value = json.loads(line)
    if "_dlqMessage" in value:
        value["_dlqMessage"] = {
            k: v for k, v in value["_dlqMessage"].items() if k not in RUN_FIELDS
        }
    return value


def dlq_processor_names(stdout: str) -> set[str]:
    return {
        json.loads(line)["_dlqMessage"]["processorName"]
        for line in stdout.splitlines()
        if line.startswith('{"_dlqMessage"')
    }


def ephemeral_names(service: ServiceProcess) -> list[str]:
    with service.http() as client:
        body = client.get("/api/v1/processors").json()
    return [p["name"] for p in body["results"] if p.get("ephemeral")]


def test_the_window_example_runs_on_the_service_as_it_runs_locally(
    service: ServiceProcess, window_file: Path
) -> None:
    remote = service.cli("process", str(window_file))
    assert remote.returncode == 0, remote.stderr
    local = service.cli("process", "--local", str(window_file))
    assert local.returncode == 0, local.stderr

    assert [comparable(line) for line in remote.stdout.splitlines()] == [
        comparable(line) for line in local.stdout.splitlines()
    ]
    lines = remote.stdout.splitlines()
    assert len(lines) == 4 and lines[2].startswith('{"_dlqMessage"')
    # The DLQ record names the processor that produced it: an ephemeral one of the service,
    # and `process` in the local run.
    (remote_name,) = dlq_processor_names(remote.stdout)
    assert remote_name.startswith("process-")
    assert dlq_processor_names(local.stdout) == {"process"}
    # Output documents are the local run's bytes, not a re-encoding.
    assert lines[0] == local.stdout.splitlines()[0]
    assert ephemeral_names(service) == []


def test_problems_exit_2_with_the_local_paths(service: ServiceProcess, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps([{"$source": {"documents": [{"a": 1}]}}, {"$match": {"a": {"$gtt": 1}}}])
    )
    result = service.cli("process", str(path))
    assert result.returncode == 2, result.stderr
    problems = json.loads(result.stderr.strip().splitlines()[-1])["problems"]
    assert [p["path"] for p in problems] == ["/1/$match/a/$gtt"]
    assert result.stdout == ""


def test_an_ephemeral_processor_is_listed_and_gone_when_its_client_is_killed(
    service: ServiceProcess, tmp_path: Path
) -> None:
    path = tmp_path / "endless.json"
    path.write_text(json.dumps([{"$source": {"connectionName": "sample_stream_solar"}}]))
    env = {**clean_env(), "SLUICE_URL": service.url, "SLUICE_DATA_DIR": str(service.data_dir)}
    client = subprocess.Popen(
        [*SLUICE, "process", str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert client.stdout is not None
        first = client.stdout.readline()
        assert json.loads(first)["device_id"], first
        (name,) = poll(
            lambda: ephemeral_names(service), timeout=60, message="no ephemeral processor listed"
        )
        with service.http() as http:
            listed = http.get("/api/v1/processors").json()
        entry = next(p for p in listed["results"] if p["name"] == name)
        assert entry["state"] == "STARTED" and entry["stats"]["outputMessageCount"] >= 1
        assert listed["totalCount"] == len(listed["results"])
        # Opens by name while it runs (the console's processor page), marked ephemeral.
        with service.http() as http:
            by_name = http.get(f"/api/v1/processors/{name}")
        assert by_name.status_code == 200 and by_name.json()["ephemeral"] is True

        os.killpg(client.pid, signal.SIGKILL)
        client.wait(timeout=30)
        poll(
            lambda: ephemeral_names(service) == [],
            timeout=120,
            message=f"{name} still listed after its client was killed",
        )
        # Never stored: gone by name too, nothing left to resume on a restart.
        with service.http() as http:
            assert http.get(f"/api/v1/processors/{name}").status_code == 404
    finally:
        if client.poll() is None:
            os.killpg(client.pid, signal.SIGKILL)
            client.wait(timeout=30)
