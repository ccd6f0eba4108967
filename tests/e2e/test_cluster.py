"""Scale out: the real service on a 2-worker Spark standalone cluster gives local mode's results.

`LocalCluster` (what `sluice cluster up` runs) starts a master and two 1-core workers on
127.0.0.1; the service runs as a subprocess with `SLUICE_SPARK_MASTER=spark://...`, so it is
its own driver and ships Sluice to the executors. Its nodes share this machine's disk, which
the service is told with `SLUICE_SHARED_STORAGE=true`. The driver's Spark UI is switched on
through the pass-through conf (`SLUICE_SPARK_CONF_spark__ui__enabled`) so the tests can ask
Spark's REST API which executors ran tasks.

The reference results come from the same scenario on a `local[2]` service.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.runtime.cluster import LocalCluster, is_spark_daemon
from tests.e2e.cluster_scenario import Outcome, records, run_scenarios
from tests.e2e.service_process import ServiceProcess, free_port, poll

pytestmark = [pytest.mark.slow]

#: Executors small enough for 1 GiB workers on a shared 2-core machine; windows split over two
#: buckets, whose state partitions (3: `spark.state_partitions`) put them on both executors. (A
#: one-bucket window runs its state in one partition: one task, on one executor.)
CLUSTER_CONF = {
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.sluice.window.buckets": "2",
}


def chunks(docs: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    return [docs[i : i + size] for i in range(0, len(docs), size)]


BASIC = chunks(records(80), 41)
WITH_KILL = chunks(records(120), 12)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Both scenarios on a local-mode service (the expected results)."""
    service = ServiceProcess(tmp_path_factory.mktemp("local") / "data").start()
    try:
        with service.http() as client:
            outcomes = run_scenarios(client, {"basic": BASIC, "kill": WITH_KILL})
    finally:
        service.cleanup()
    return outcomes


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = LocalCluster(tmp_path_factory.mktemp("cluster") / "cluster")
    local.up(workers=2, cores=1, memory="1g", timeout=120)
    try:
        yield local
    finally:
        local.down()


@pytest.fixture(scope="module")
def on_cluster(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[ServiceProcess, str]]:
    """The service as a driver of the cluster; yields it and its Spark UI's REST root."""
    state = cluster.read_state()
    assert state is not None
    ui_port = free_port()
    env = {
        "SLUICE_SPARK_MASTER": state.master_url,
        "SLUICE_SHARED_STORAGE": "true",
        "SLUICE_SPARK_CONF_spark__ui__enabled": "true",
        "SLUICE_SPARK_CONF_spark__ui__port": str(ui_port),
        **{"SLUICE_SPARK_CONF_" + k.replace(".", "__"): v for k, v in CLUSTER_CONF.items()},
    }
    service = ServiceProcess(tmp_path_factory.mktemp("driver") / "data", extra_env=env)
    try:
        service.start(timeout=240)
        yield service, f"http://127.0.0.1:{ui_port}/api/v1"
    finally:
        service.cleanup()


def other_python() -> str | None:
    """An interpreter of another Python 3 minor version (3.10+), if this machine has one."""
    names = [shutil.which(f"python3.{minor}") for minor in range(10, 15)]
    names += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1*/bin/python3.1*")))
    for name in filter(None, names):
        if name.endswith("-config"):
            continue
        probe = subprocess.run(
            [name, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True
        )
        if probe.returncode == 0 and probe.stdout.strip() != str(sys.version_info[1]):
            return name
    return None


def test_executors_on_another_python_fail_the_engine_with_the_reason(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Runs before the module's cluster service exists: the cluster's cores are free."""
    interpreter = other_python()
    if interpreter is None:
        pytest.skip("no Python of another minor version on this machine")
    state = cluster.read_state()
    assert state is not None
    env = {
        "SLUICE_SPARK_MASTER": state.master_url,
        "SLUICE_SHARED_STORAGE": "true",
        "SLUICE_EXECUTOR_CHECK_TIMEOUT_SECONDS": "120",
        "PYSPARK_PYTHON": interpreter,  # what executors start; the driver stays on this one
        **{"SLUICE_SPARK_CONF_" + k.replace(".", "__"): v for k, v in CLUSTER_CONF.items()},
    }
    service = ServiceProcess(tmp_path / "data", extra_env=env)
    try:
        service.start(timeout=240, until="failed")
        health = httpx.get(f"{service.url}/healthz", timeout=10).json()
        here = "{}.{}".format(*sys.version_info[:2])
        assert health["engine"] == "failed"
        assert f"runs Python {here}" in health["engineError"]
        assert health["engineError"].startswith("executors run Python 3.")
        with service.http() as client:
            created = client.post("/api/v1/connections", json={"name": "c", "type": "HttpIngest"})
            assert created.status_code == 201
            body = {"name": "p", "pipeline": [{"$source": {"connectionName": "c"}}]}
            answer = client.post("/api/v1/processors", json=body)
            assert answer.status_code == 503, answer.text
            assert "executors run Python" in answer.json()["detail"]
    finally:
        service.cleanup()


def application(rest: str) -> str:
    """The REST URL of the service's Spark application (the driver runs one)."""
    apps = httpx.get(f"{rest}/applications", timeout=10).json()
    return f"{rest}/applications/{apps[0]['id']}"


def executors(rest: str) -> dict[str, dict[str, Any]]:
    """Every executor the application had (`allexecutors` keeps the dead ones)."""
    listed = httpx.get(f"{application(rest)}/allexecutors", timeout=10).json()
    return {e["id"]: e for e in listed if e["id"] != "driver"}


def shuffle_readers(rest: str, after_stage: int) -> dict[str, int]:
    """Per executor, the tasks of stages after `after_stage` that read shuffled rows: the
    window operator's state tasks, one per bucket with rows."""
    stages = httpx.get(f"{application(rest)}/stages", params={"details": "true"}, timeout=30).json()
    readers: dict[str, int] = {}
    for stage in stages:
        if stage["stageId"] <= after_stage:
            continue
        for task in (stage.get("tasks") or {}).values():
            read = (task.get("taskMetrics") or {}).get("shuffleReadMetrics", {})
            if read.get("recordsRead", 0) > 0:
                readers[task["executorId"]] = readers.get(task["executorId"], 0) + 1
    return readers


def last_stage(rest: str) -> int:
    stages = httpx.get(f"{application(rest)}/stages", timeout=30).json()
    return max((stage["stageId"] for stage in stages), default=-1)


def test_windows_and_dlq_on_two_executors_equal_local_mode(
    reference: dict[str, Outcome], on_cluster: tuple[ServiceProcess, str]
) -> None:
    service, rest = on_cluster
    before = {i: e["totalTasks"] for i, e in executors(rest).items()}
    first_stage = last_stage(rest)
    with service.http() as client:
        outcome = run_scenarios(client, {"basic": BASIC})["basic"]
    assert outcome == reference["basic"]
    assert len(outcome.windows) == 12 and len(outcome.dlq) == 2
    assert outcome.sample_dlq == outcome.dlq
    after = executors(rest)
    ran = {i: e["totalTasks"] - before.get(i, 0) for i, e in after.items()}
    assert len(after) == 2 and all(n > 0 for n in ran.values()), f"tasks per executor: {ran}"
    # The window's two buckets ran on both executors (their state partitions keep them apart).
    readers = shuffle_readers(rest, first_stage)
    assert set(readers) == set(after), f"state tasks with rows per executor: {readers}"
    assert {e["hostPort"].split(":")[0] for e in after.values()} == {"127.0.0.1"}
    assert "sluice-code-" in " ".join(p.name for p in (service.data_dir / "spark-code").iterdir())


def test_a_killed_worker_is_survived_with_exact_results(
    reference: dict[str, Outcome], on_cluster: tuple[ServiceProcess, str], cluster: LocalCluster
) -> None:
    service, rest = on_cluster
    state = cluster.read_state()
    assert state is not None
    victim = state.workers[0]

    def kill_after_third_chunk(index: int) -> None:
        if index == 2:
            # The worker and the executor it launched share a process group: a lost node.
            os.killpg(victim.pid, signal.SIGKILL)

    with service.http() as client:
        outcome = run_scenarios(client, {"kill": WITH_KILL}, after_chunk=kill_after_third_chunk)[
            "kill"
        ]
        stats = client.get("/api/v1/processors/kill/stats").json()
    assert not is_spark_daemon(victim.pid)
    assert outcome == reference["kill"]
    assert len(outcome.windows) == 18 and len(outcome.dlq) == 4
    assert stats["inputMessageCount"] == sum(len(c) for c in WITH_KILL)
    lost = poll(
        lambda: [i for i, e in executors(rest).items() if not e["isActive"]],
        timeout=60,
        message="Spark never noticed the lost executor",
    )
    assert len(lost) == 1, json.dumps(executors(rest), indent=1)[:2000]


def test_cluster_state_file_records_the_daemons(cluster: LocalCluster) -> None:
    status = cluster.status()
    assert status["running"] and status["masterUrl"].startswith("spark://127.0.0.1:")
    assert Path(cluster.state_file).exists()
    assert [d["role"] for d in status["daemons"]] == ["master", "worker-1", "worker-2"]
