"""Crash recovery: kill -9 of the service and its Spark JVM at random points changes nothing.

The "Connectors and delivery" acceptance test. Three processors run in one service: tumbling
windows over Kafka and over HTTP ingest, both `$merge`d into `local`, and a stateless
processor on the same HTTP connection that `$emit`s to a File connection; all three have a
DLQ in `local`. The input has out-of-order, late, failing and non-JSON records, and its last
document (far in the future) closes every window by event time. There is no `idleTimeout`:
nothing depends on the wall clock, so the results cannot depend on when the kills land.

* **Reference**: the processors run uninterrupted on a fresh data directory, once per module
  (default engine); their results must equal what `crash_scenario.expect` computes in plain
  Python from the input. Each engine's crash run must equal it exactly.
* **Crash run**: the same processors (same names, so the same deterministic ids) on another
  data directory. Several times, at a random moment chosen from the observed progress (after
  the first batch committed in that service lifetime, plus a random delay; once without
  waiting, while the processors are still resuming), the service process and its JVM are
  killed with SIGKILL in random order; once both are dead, a new service starts on the same
  data directory and resumes the processors from their checkpoints.
* The final `$merge` collections, DLQ records (without `dlqTime`) and the set of documents in
  the File sink's files must equal the reference's, with no document, window or DLQ record
  twice.
* The stats must equal what the sinks hold, in both runs: every input record counted once
  (`inputMessageCount` = the records sent; a stateless processor's records are its outputs
  plus its DLQ records, a window processor's are the documents in its windows, plus its DLQ
  records, plus the one document of the window the input leaves open), `outputMessageCount` =
  the documents in the `$merge` collection or the File sink, `dlqMessageCount` = the DLQ
  records, and every byte count equal to the uninterrupted run's. After each restart, the
  stats the API shows are never below what the killed service had persisted, and say
  `recovering` or `running`, nothing else.

The Kafka input is produced before anything starts (acknowledged) and read 16 records per
micro-batch. The HTTP ingest source has no per-batch limit (`$source.config` is not passed
to it), so HTTP input posted up front would be read in one micro-batch; instead it is posted
in small requests spread over the service lifetimes, each request acknowledged (202: spooled
and fsynced) before any kill. Arrival order, hence spool sequence numbers and results, are
the same as in the reference, which posts the same requests in the same order up front.

`SLUICE_CRASH_SEED` picks the random kill schedule (default fixed); the seed and the
schedule are in the assertion messages and printed (`-s`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import crash_scenario as S
from tests.e2e.service_process import ServiceProcess, alive, jvm_pid, poll
from tests.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.kafka]

#: Kills per crash run (at least 2: one early, one at a written-not-committed File batch).
KILLS = max(2, int(os.environ.get("SLUICE_CRASH_KILLS", "3")))
SEED = int(os.environ.get("SLUICE_CRASH_SEED", "20240611"))
KAFKA_DOCS = 200
HTTP_DOCS = 200
#: Records per HTTP ingest request (the HTTP input is posted in this many-record requests).
RECORDS_PER_REQUEST = 10
#: Bounded waits (seconds): JVM start, first batch of a lifetime, catching up at the end.
START_TIMEOUT = 240.0
PROGRESS_TIMEOUT = 180.0
FINISH_TIMEOUT = 360.0
#: The batch id in a File-sink file name (`pipeline_stages/_connectors/sinks/partitioned.py`).
BATCH_FILE = re.compile(r"-(\d{12})(?:-\d{5})?\.jsonl$")


# --------------------------------------------------------------------------- processes


def process_group(pgid: int) -> list[int]:
    """Live members of a process group (the service's: it runs in its own session)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        # Fields after the command: state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.append(int(entry.name))
    return members


def java_in(pgid: int) -> int | None:
    """The service's Spark JVM: the `java` process in its process group."""
    for pid in process_group(pgid):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                return pid
        except OSError:
            continue
    return None


# --------------------------------------------------------------------------- one deployment


@dataclass
class Deployment:
    """One data directory with its File connection root, run by successive services."""

    root: Path
    broker: KafkaBroker
    topic: str
    #: `spark.sluice.window.engine` of the service ("operator" is the default).
    engine: str = "operator"
    log: list[str] = field(default_factory=list)
    service: ServiceProcess | None = None
    ids: dict[str, str] = field(default_factory=dict)
    #: Process groups of killed services, swept at teardown.
    groups: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def files(self) -> Path:
        return self.root / "files"

    def note(self, message: str) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} {message}")
        print(f"[{self.root.name}] {message}", flush=True)

    def start_service(self) -> ServiceProcess:
        began = time.monotonic()
        env = {
            "SLUICE_SPARK_CONF_spark__sluice__window__engine": self.engine,
            # Kills are the subject here, not the retry limit: on a loaded machine a query can
            # fail to start a Python worker in time, and it must be retried, not given up on.
            "SLUICE_RESTART_ATTEMPTS": "8",
        }
        self.service = ServiceProcess(self.data_dir, extra_env=env).start(timeout=START_TIMEOUT)
        self.note(f"service {self.service.proc.pid} ready in {time.monotonic() - began:.0f} s")  # type: ignore[union-attr]
        return self.service

    def create_processors(self) -> None:
        """Connections, then the three processors, started (Kafka from the earliest offset)."""
        assert self.service is not None
        self.files.mkdir(parents=True, exist_ok=True)
        connections = [
            {"name": "events", "type": "Kafka", **self.broker.connection_config()},
            {"name": "readings", "type": "HttpIngest"},
            {"name": "files", "type": "File", "directory": str(self.files)},
        ]
        with self.service.http() as client:
            for body in connections:
                created = client.post("/api/v1/connections", json=body)
                assert created.status_code == 201, created.text
            for name, pipeline in S.processors(self.topic).items():
                created = client.post(
                    "/api/v1/processors",
                    json={"name": name, "pipeline": pipeline, "options": S.dlq_option(name)},
                )
                assert created.status_code == 201, created.text
                self.ids[name] = created.json()["_id"]
                started = client.post(f"/api/v1/processors/{name}:start")
                assert started.json()["state"] == "STARTED", started.text

    def post(self, body: str) -> None:
        """One NDJSON ingest request, acknowledged (spooled durably) before returning."""
        assert self.service is not None
        with self.service.http() as client:
            response = client.post(
                "/api/v1/ingest/readings",
                content=body.encode(),
                headers={"Content-Type": "application/x-ndjson"},
            )
        assert response.status_code == 202, response.text

    # ------------------------------------------------------------------ progress

    def commits(self, name: str) -> list[int]:
        """Committed micro-batch ids of a processor's checkpoint (every generation)."""
        root = self.data_dir / "checkpoints" / self.ids[name]
        return sorted(
            int(p.name) for p in root.glob("g*/commits/*") if p.is_file() and p.name.isdigit()
        )

    def committed_end(self, name: str) -> Any:
        """The source offset up to which the last committed micro-batch read (None if none)."""
        done = self.commits(name)
        if not done:
            return None
        (offsets,) = (self.data_dir / "checkpoints" / self.ids[name]).glob(f"g*/offsets/{done[-1]}")
        return json.loads(offsets.read_text().splitlines()[-1])

    def planned(self, name: str) -> list[int]:
        """Micro-batch ids with offsets in the checkpoint (planned: committed or in flight)."""
        root = self.data_dir / "checkpoints" / self.ids[name]
        return sorted(
            int(p.name) for p in root.glob("g*/offsets/*") if p.is_file() and p.name.isdigit()
        )

    def progress(self) -> dict[str, str]:
        """Per processor: committed batches, and the batch in flight if any."""
        out = {}
        for name in S.PROCESSORS:
            done, planned = self.commits(name), self.planned(name)
            flying = [b for b in planned if b not in done]
            out[name] = f"{len(done)} committed" + (f", batch {flying} in flight" if flying else "")
        return out

    def written_uncommitted(self, since: float) -> int | None:
        """A batch whose File-sink file was written (after `since`, a wall-clock time) while
        its commit does not exist (None if none)."""
        directory = self.files / S.EMIT_PATH
        if not directory.is_dir():
            return None
        # `<processor>-<run>-<batch id>.jsonl`, or `...-<batch id>-<k>.jsonl` for a batch
        # written by several partitions.
        named = ((name, BATCH_FILE.search(name)) for name in os.listdir(directory))
        written = {
            int(found.group(1))
            for name, found in named
            if found is not None
            and not name.startswith(".")
            and (directory / name).stat().st_mtime >= since
        }
        # Read after the files: a batch committing in between counts as committed.
        missing = written - set(self.commits(S.HTTP_FILES))
        return min(missing) if missing else None

    def total_commits(self) -> int:
        return sum(len(self.commits(name)) for name in S.PROCESSORS)

    def finished(self, ends: dict[str, Any]) -> bool:
        """Every processor committed a batch that read its source to the end."""
        return all(self.committed_end(name) == end for name, end in ends.items())

    def wait_finished(self, ends: dict[str, Any]) -> None:
        began = time.monotonic()
        try:
            poll(lambda: self.finished(ends), timeout=FINISH_TIMEOUT, every=1.0, message="")
        except AssertionError:
            committed = {name: self.committed_end(name) for name in ends}
            raise AssertionError(
                f"[{self.root.name}] the processors did not read all input in "
                f"{FINISH_TIMEOUT:g} s: committed ends {committed}, expected {ends}; states "
                f"{self.states()}; {self.log}\n{self.service.log_tail() if self.service else ''}"
            ) from None
        self.note(f"all input processed in {time.monotonic() - began:.0f} s")

    def states(self) -> dict[str, str]:
        if (
            self.service is None
            or self.service.proc is None
            or self.service.proc.poll() is not None
        ):
            return {}
        with self.service.http() as client:
            return {
                name: client.get(f"/api/v1/processors/{name}").json().get("state", "?")
                for name in S.PROCESSORS
            }

    # ------------------------------------------------------------------ kill -9

    def kill(self, rng: random.Random) -> None:
        """SIGKILL the service and its JVM (random order), and wait until both are gone."""
        service = self.service
        assert service is not None and service.proc is not None
        pid = service.proc.pid
        jvm = java_in(pid)
        assert jvm is not None, f"no JVM under service {pid}"
        for processor_id in self.ids.values():
            lock = self.data_dir / "checkpoints" / processor_id / "driver.lock"
            if json.loads(lock.read_text() or "{}").get("pid") == pid:
                # A query this service launched: its lock names the same JVM.
                assert jvm_pid(self.data_dir, processor_id) == jvm
        first_jvm = rng.random() < 0.5
        for victim in (jvm, pid) if first_jvm else (pid, jvm):
            os.kill(victim, signal.SIGKILL)
        service.proc.wait(timeout=30)
        poll(lambda: not alive(jvm), timeout=30, message=f"JVM {jvm} survived SIGKILL")
        self.groups.append(pid)
        # Python workers of the dead JVM notice on their own; none may outlive it for long.
        poll(
            lambda: not process_group(pid),
            timeout=30,
            message=f"processes of the killed service still run: {process_group(pid)}",
        )
        self.service = None
        self.note(f"killed {'JVM' if first_jvm else 'service'} first: service {pid}, JVM {jvm}")

    def sweep(self) -> None:
        """Teardown: stop the running service; SIGKILL stragglers of killed ones (ours)."""
        if self.service is not None:
            self.service.cleanup()
        for group in self.groups:
            for member in process_group(group):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member, signal.SIGKILL)

    def stop(self) -> None:
        assert self.service is not None
        assert self.service.stop() in (0, -signal.SIGTERM)

    # ------------------------------------------------------------------ stats

    def api_stats(self) -> dict[str, dict[str, Any]]:
        """Every processor's stats as the running service's API shows them."""
        assert self.service is not None
        with self.service.http() as client:
            return {
                name: client.get(f"/api/v1/processors/{name}/stats").json() for name in S.PROCESSORS
            }

    def check_stats_kept(self, persisted: dict[str, dict[str, int]]) -> list[str]:
        """Right after a restart: the API's counters are not below what the killed service
        persisted (a replayed batch replaces its counts; new batches only add), and the
        status is `recovering` or `running`. Returns the statuses seen."""
        shown = self.api_stats()
        seen = []
        for name, counters in persisted.items():
            stats = shown[name]
            seen.append(f"{name}: {stats['status']} ({stats.get('statusDetail') or '-'})")
            assert stats["status"] in ("recovering", "running"), (name, stats, self.log)
            lower = {c: (stats[c], v) for c, v in counters.items() if stats[c] < v}
            assert not lower, f"{name}: counters went down after a restart {lower}; {self.log}"
        self.note(f"after the restart: {'; '.join(seen)}")
        return seen


@pytest.fixture
def deployments() -> Iterator[list[Deployment]]:
    made: list[Deployment] = []
    yield made
    for deployment in made:
        deployment.sweep()


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Input:
    kafka: list[S.Record]
    http: list[S.Record]
    requests: list[str]  # NDJSON bodies, in posting order
    ends: dict[str, Any]  # processor -> source offset after the last record


def make_input(broker: KafkaBroker) -> tuple[Input, str]:
    topic = broker.create_topic(1, prefix="crash")  # one partition: a defined order
    kafka = S.generate(0, KAFKA_DOCS)
    http = S.generate(100_000, HTTP_DOCS)
    broker.produce(topic, [r.text for r in kafka], partition=0)
    requests = [
        "".join(r.text + "\n" for r in http[i : i + RECORDS_PER_REQUEST])
        for i in range(0, len(http), RECORDS_PER_REQUEST)
    ]
    http_end = {"seq": len(http)}  # spool sequence numbers are gap-free from 1
    ends = {
        S.KAFKA_WINDOWS: {topic: {"0": len(kafka)}},
        S.HTTP_WINDOWS: http_end,
        S.HTTP_FILES: http_end,
    }
    return Input(kafka, http, requests, ends), topic


# --------------------------------------------------------------------------- runs


def run_uninterrupted(deployment: Deployment, data: Input) -> S.Results:
    deployment.start_service()
    deployment.create_processors()
    for body in data.requests:
        deployment.post(body)
    deployment.wait_finished(data.ends)
    deployment.stop()
    return S.read_results(deployment.data_dir, deployment.files)


def catch_written_uncommitted(deployment: Deployment, timeout: float) -> int | None:
    """Wait until the File-sink processor has written a batch's file but not committed it.

    Returns that batch id, or None once a batch committed without being seen in that state
    (or at the timeout): the window between the sink's write and Spark's commit is short.
    """
    committed = len(deployment.commits(S.HTTP_FILES))
    since = time.time()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        caught = deployment.written_uncommitted(since)
        if caught is not None:
            return caught
        if len(deployment.commits(S.HTTP_FILES)) > committed:
            return None
        time.sleep(0.005)
    return None


def run_with_kills(deployment: Deployment, data: Input, rng: random.Random) -> S.Results:
    # Requests posted per lifetime: spread over the killed lifetimes, the rest after the last.
    per_life = max(1, len(data.requests) // (KILLS + 1))
    pending = list(data.requests)
    lives = list(range(KILLS))
    # One lifetime is killed without waiting for progress (processors still resuming), one
    # as soon as a File-sink batch is written but not committed (its replay must rewrite
    # the same file), the others 1-3 committed batches plus a random delay after the start.
    early = rng.choice(lives[1:])
    targeted = rng.choice([life for life in lives if life != early])
    persisted: dict[str, dict[str, int]] = {}
    for life in lives:
        deployment.start_service()
        if life == 0:
            deployment.create_processors()
        else:
            deployment.check_stats_kept(persisted)
        before = deployment.total_commits()
        caught: int | None = None
        posted = 0
        for body in pending[:per_life]:
            deployment.post(body)
            posted += 1
            if life == targeted:
                caught = catch_written_uncommitted(deployment, timeout=60)
                if caught is not None:
                    break
            else:
                time.sleep(rng.uniform(0.1, 0.5))
        del pending[:posted]
        if caught is not None:
            delay = 0.0
            deployment.note(f"life {life}: File-sink batch {caught} written, not committed")
        elif life == early:
            delay = rng.uniform(0.0, 3.0)
            deployment.note(f"life {life}: early kill in {delay:.1f} s (processors resuming)")
        else:
            # The kill lands anywhere in a batch (reading, windowing, writing, committing).
            wanted = before + rng.randint(1, 3)
            poll(
                lambda wanted=wanted: deployment.total_commits() >= wanted,
                timeout=PROGRESS_TIMEOUT,
                every=0.2,
                message=f"no micro-batch committed in life {life}: {deployment.log}",
            )
            delay = rng.uniform(0.2, 3.0)
            deployment.note(
                f"life {life}: {wanted - before} batches committed; kill in {delay:.1f} s"
            )
        time.sleep(delay)
        deployment.note(f"life {life}: before the kill {deployment.progress()}")
        deployment.kill(rng)
        persisted = S.read_stats(deployment.data_dir)
        deployment.note(f"life {life}: persisted stats {persisted}")
    deployment.start_service()
    deployment.check_stats_kept(persisted)
    assert deployment.states() == dict.fromkeys(S.PROCESSORS, "STARTED")
    for body in pending:
        deployment.post(body)
    deployment.wait_finished(data.ends)
    deployment.stop()
    return S.read_results(deployment.data_dir, deployment.files)


# --------------------------------------------------------------------------- checks


def as_ms(value: Any) -> int:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return int(
        datetime.fromisoformat(str(value["$date"]).replace("Z", "+00:00")).timestamp() * 1000
    )


def check_against_model(results: S.Results, data: Input) -> None:
    """The uninterrupted run computed what Atlas's window rules say (plain Python)."""
    for name, records in ((S.KAFKA_WINDOWS, data.kafka), (S.HTTP_WINDOWS, data.http)):
        expected = S.expect(records)
        got = {
            (as_ms(d["start"]), d["key"]): (d["n"], d["total"], list(d["ids"]))
            for d in results.merged[name]
        }
        assert len(got) == len(results.merged[name]), f"{name}: two results for one window"
        assert got == expected.windows, f"{name}: windows differ from the model"
        dlq = results.dlq[name]
        late = {
            r["doc"]["id"]: as_ms(r["missedWindowStartTimes"][0])
            for r in dlq
            if r["errInfo"]["reason"] == S.LATE_REASON
        }
        assert late == expected.late, f"{name}: late records differ from the model"
        failed = sorted(r["doc"]["id"] for r in dlq if r["operatorName"] == "AddFieldsOperator")
        assert failed == expected.failed, f"{name}: $divide failures differ"
        not_json = sorted(r["doc"] for r in dlq if r["operatorName"] == "SourceOperator")
        assert not_json == sorted(expected.not_json), f"{name}: non-JSON records differ"
        assert len(dlq) == len(late) + len(failed) + len(not_json), f"{name}: unexpected DLQ"
    http = S.expect(data.http)
    assert sorted(d["id"] for d in results.emitted) == sorted(http.passed)
    files_dlq = results.dlq[S.HTTP_FILES]
    assert sorted(
        r["doc"]["id"] for r in files_dlq if r["operatorName"] == "AddFieldsOperator"
    ) == (http.failed)
    assert len(files_dlq) == len(http.failed) + len(http.not_json)


def check_same(crashed: S.Results, reference: S.Results, context: str) -> None:
    """No duplicates after the crashes, and exactly the reference's documents."""
    for name in (S.KAFKA_WINDOWS, S.HTTP_WINDOWS):
        windows = [(str(d["start"]), d["key"]) for d in crashed.merged[name]]
        assert not S.duplicates(windows), (
            f"{name}: windows merged twice {S.duplicates(windows)}; {context}"
        )
        got = sorted(S.canonical(d) for d in crashed.merged[name])
        want = sorted(S.canonical(d) for d in reference.merged[name])
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        assert got == want, f"{name}: $merge differs; missing {missing}, extra {extra}; {context}"
    for name in S.PROCESSORS:
        ids = [str(r["_id"]) for r in crashed.dlq[name]]
        assert not S.duplicates(ids), f"{name}: DLQ ids twice {S.duplicates(ids)}; {context}"
        got = [S.comparable_dlq({**r, "_id": None}) for r in crashed.dlq[name]]
        assert not S.duplicates(got), f"{name}: a DLQ record twice {S.duplicates(got)}; {context}"
        got_full = sorted(S.comparable_dlq(r) for r in crashed.dlq[name])
        want_full = sorted(S.comparable_dlq(r) for r in reference.dlq[name])
        missing = sorted(set(want_full) - set(got_full))
        extra = sorted(set(got_full) - set(want_full))
        assert got_full == want_full, (
            f"{name}: DLQ differs; missing {missing}, extra {extra}; {context}"
        )
    emitted = [S.canonical(d) for d in crashed.emitted]
    assert not S.duplicates(emitted), (
        f"File sink: documents written twice {S.duplicates(emitted)[:5]}; files {crashed.files}; {context}"
    )
    want_emitted = Counter(S.canonical(d) for d in reference.emitted)
    assert Counter(emitted) == want_emitted, (
        f"File sink differs: missing {sorted((want_emitted - Counter(emitted)).elements())[:5]}, "
        f"extra {sorted((Counter(emitted) - want_emitted).elements())[:5]}; {context}"
    )


def check_stats(results: S.Results, data: Input, context: str) -> None:
    """The stats say what the sinks hold: each record read once, each document and DLQ
    record written once."""
    sent = {S.KAFKA_WINDOWS: data.kafka, S.HTTP_WINDOWS: data.http, S.HTTP_FILES: data.http}
    for name in S.PROCESSORS:
        stats = results.stats[name]
        held = {
            "inputMessageCount": len(sent[name]),
            "outputMessageCount": (
                len(results.emitted) if name == S.HTTP_FILES else len(results.merged[name])
            ),
            "dlqMessageCount": len(results.dlq[name]),
        }
        got = {counter: stats[counter] for counter in held}
        assert got == held, f"{name}: stats {got}, the sinks hold {held}; {context}"
        if name == S.HTTP_FILES:
            accounted = stats["outputMessageCount"] + stats["dlqMessageCount"]
        else:
            # Documents in closed windows, DLQ records, and the one document (the closer)
            # in the window the input leaves open.
            in_windows = sum(int(d["n"]) for d in results.merged[name])
            accounted = in_windows + stats["dlqMessageCount"] + 1
        assert stats["inputMessageCount"] == accounted, (
            f"{name}: {stats['inputMessageCount']} records read, {accounted} accounted for; "
            f"{context}"
        )
        raw = sum(len(r.text.encode()) for r in sent[name])
        assert stats["inputMessageSize"] == raw, (
            f"{name}: {stats['inputMessageSize']} input bytes counted, {raw} sent; {context}"
        )


def check_same_stats(crashed: S.Results, reference: S.Results, context: str) -> None:
    """Every counter, byte counts included, equals the uninterrupted run's."""
    for name in S.PROCESSORS:
        assert crashed.stats[name] == reference.stats[name], (
            f"{name}: stats {crashed.stats[name]} after the crashes, "
            f"{reference.stats[name]} uninterrupted; {context}"
        )


# --------------------------------------------------------------------------- the test


@dataclass(frozen=True)
class Reference:
    """The input, its Kafka topic and the uninterrupted run's results."""

    data: Input
    topic: str
    results: S.Results
    seconds: float


@pytest.fixture(scope="module")
def reference(kafka_broker: KafkaBroker, tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """One uninterrupted run (the default engine) that both engines' crash runs must equal:
    the engines must agree exactly, and a second reference run cost a whole service life."""
    began = time.monotonic()
    data, topic = make_input(kafka_broker)
    for records in (data.kafka, data.http):
        model = S.expect(records)
        # The input exercises what it is meant to: late, failing and non-JSON records, and
        # out-of-order records accepted into an earlier, still open window.
        assert len(model.late) >= 3 and len(model.failed) >= 3 and len(model.not_json) >= 2
        assert len(model.windows) >= 40
    deployment = Deployment(tmp_path_factory.mktemp("reference"), kafka_broker, topic)
    try:
        results = run_uninterrupted(deployment, data)
    finally:
        deployment.sweep()
    check_against_model(results, data)
    check_stats(results, data, "uninterrupted run")
    return Reference(data, topic, results, time.monotonic() - began)


@pytest.mark.parametrize("engine", ["operator", "batch"])
def test_kill_9_at_random_points_leaves_the_results_of_an_uninterrupted_run(
    kafka_broker: KafkaBroker,
    tmp_path: Path,
    deployments: list[Deployment],
    reference: Reference,
    engine: str,
) -> None:
    """Under both window engines: the batch engine (`batch.engine`) keeps its state in the
    driver, saved per batch id beside the checkpoint, instead of Spark's state store."""
    began = time.monotonic()
    data = reference.data
    rng = random.Random(SEED)
    crash_deployment = Deployment(tmp_path / "crashed", kafka_broker, reference.topic, engine)
    deployments.append(crash_deployment)
    crashed = run_with_kills(crash_deployment, data, rng)
    context = f"seed {SEED}; schedule {crash_deployment.log}"
    check_same(crashed, reference.results, context)
    check_against_model(crashed, data)
    check_stats(crashed, data, context)
    check_same_stats(crashed, reference.results, context)
    assert not crashed.temp_files or all(n.endswith(".tmp") for n in crashed.temp_files)
    # The batch engine ran both window processors (their state files), the operator none.
    states = list(crash_deployment.data_dir.rglob("sluice-window-state/*.state"))
    holders = {path.parent for path in states}
    assert len(holders) >= 2 if engine == "batch" else not holders, states
    print(
        f"reference run {reference.seconds:.0f} s, {engine} crash run "
        f"{time.monotonic() - began:.0f} s, seed {SEED}, {KILLS} kills; "
        f"stats {crashed.stats}",
        flush=True,
    )
