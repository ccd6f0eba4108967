"""A real Kafka-protocol broker for tests: noida-db 0.2.3 (`--only kafka`) on a free port.

The session-scoped `kafka_broker` fixture starts one broker with a fresh data directory,
waits until a produce + assign/seek read round trip succeeds (bounded), and stops it at the
end, waiting for the process to exit. noida-db is occasionally flaky on consumer-group
joins and, rarely, on a first fetch (kafka-options.md §1): readiness failures restart a fresh
instance a bounded number of times here, and helpers read with `assign` only (no groups).
Assertions are never retried.

`SLUICE_TEST_KAFKA_BOOTSTRAP=host:port` points the tests at an external broker instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

READY_TIMEOUT_S = 20.0
START_ATTEMPTS = 3
#: Consumer settings that keep group-less reads quick and never commit.
_READ_CONF = {
    "group.id": "sluice-tests",
    "enable.auto.commit": "false",
    "enable.partition.eof": "true",
}


@dataclass(frozen=True)
class Message:
    """A message read back from a topic."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class KafkaBroker:
    """A running broker and small helpers around confluent-kafka."""

    bootstrap: str
    process: subprocess.Popen[bytes] | None = None
    data_dir: Path | None = None

    def connection_config(self) -> dict[str, Any]:
        """A `Kafka` connection's stored config for this broker."""
        return {"bootstrapServers": self.bootstrap}

    def create_topic(self, partitions: int = 1, prefix: str = "t") -> str:
        """A new topic with a unique name (tests never share topics)."""
        from confluent_kafka.admin import AdminClient, NewTopic

        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        futures = admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)]
        )
        futures[name].result(timeout=15)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:  # metadata can lag the create answer
            described = admin.list_topics(name, timeout=5).topics.get(name)
            if (
                described is not None
                and described.error is None
                and len(described.partitions) == partitions
            ):
                return name
            time.sleep(0.1)
        raise RuntimeError(f"topic {name} did not appear")

    def produce(
        self,
        topic: str,
        values: Sequence[bytes | str | None],
        *,
        partition: int | None = None,
        keys: Sequence[bytes | None] | None = None,
        timestamps_ms: Sequence[int] | None = None,
        headers: Sequence[tuple[str, bytes]] | None = None,
    ) -> None:
        """Produce `values` in order (to one partition when given) and wait for every ack."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        errors: list[Any] = []
        for i, value in enumerate(values):
            extra: dict[str, Any] = {}
            if partition is not None:
                extra["partition"] = partition
            if timestamps_ms is not None:
                extra["timestamp"] = timestamps_ms[i]
            producer.produce(
                topic,
                value=value.encode() if isinstance(value, str) else value,
                key=keys[i] if keys is not None else None,
                headers=list(headers) if headers else None,
                on_delivery=lambda err, _msg: errors.append(err) if err else None,
                **extra,
            )
        left = producer.flush(30)
        if left or errors:
            raise RuntimeError(f"produce failed: {errors[:3]}, {left} unacknowledged")

    def read_all(self, topic: str, expected: int, timeout_s: float = 30.0) -> list[Message]:
        """Every message of `topic`, waiting (bounded) until at least `expected` are there."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, **_READ_CONF})
        try:
            parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
            deadline = time.monotonic() + timeout_s
            while True:
                ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1] for p in parts}  # fmt: skip
                if sum(ends.values()) >= expected or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            consumer.assign([TopicPartition(topic, p, 0) for p in parts if ends[p] > 0])
            out: list[Message] = []
            while len(out) < sum(ends.values()) and time.monotonic() < deadline + 10:
                for m in consumer.consume(1000, 0.5):
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            continue
                        raise RuntimeError(str(m.error()))
                    out.append(
                        Message(m.partition(), m.offset(), m.key(), m.value(), m.timestamp()[1], list(m.headers() or []))
                    )  # fmt: skip
            return sorted(out, key=lambda m: (m.partition, m.offset))
        finally:
            consumer.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _binary() -> str:
    import noida_db

    path = Path(noida_db.__file__).with_name("noida-db")
    if not path.is_file():
        raise RuntimeError(f"noida-db binary not found at {path} (pip install noida-db==0.2.3)")
    path.chmod(0o755)
    return str(path)


def _ready(broker: KafkaBroker) -> bool:
    """A topic can be created, written and read back with assign (bounded by the caller)."""
    try:
        topic = broker.create_topic(1, prefix="ready")
        broker.produce(topic, [b'{"ready": 1}'])
        return len(broker.read_all(topic, 1, timeout_s=5)) == 1
    except Exception:  # noqa: BLE001 - any failure means "not ready yet"
        return False


def stop(broker: KafkaBroker) -> None:
    """Stop the broker and wait for its PID to exit (it saves state on exit)."""
    process = broker.process
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
    if broker.data_dir is not None:
        shutil.rmtree(broker.data_dir, ignore_errors=True)


def start() -> KafkaBroker:
    """A fresh, ready broker; a failed readiness check restarts a new instance."""
    last = "not started"
    for _ in range(START_ATTEMPTS):
        port = _free_port()
        data_dir = Path(tempfile.mkdtemp(prefix="sluice-noida-"))
        log = open(data_dir.parent / f"{data_dir.name}.log", "wb")  # noqa: SIM115 - child owns it
        process = subprocess.Popen(
            [
                _binary(),
                "start",
                "--only",
                "kafka",
                "--host",
                "127.0.0.1",
                "--kafka-port",
                str(port),
                "--data-dir",
                str(data_dir),
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        broker = KafkaBroker(f"127.0.0.1:{port}", process, data_dir)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline and process.poll() is None:
            if _ready(broker):
                return broker
            time.sleep(0.3)
        last = f"exit code {process.poll()}" if process.poll() is not None else "not ready in time"
        stop(broker)
    raise RuntimeError(f"noida-db did not become ready after {START_ATTEMPTS} attempts ({last})")


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """The session's Kafka broker (see the module docstring)."""
    pytest.importorskip("confluent_kafka")
    external = os.environ.get("SLUICE_TEST_KAFKA_BOOTSTRAP")
    if external:
        yield KafkaBroker(external)
        return
    broker = start()
    try:
        yield broker
    finally:
        stop(broker)
