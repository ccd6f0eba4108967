"""A Kafka source whose brokers do not answer: one clear error, and a log that does not flood."""

from __future__ import annotations

import json
import logging
import socket

import pytest

from pipeline_stages._connectors.kafka_log import RepeatFilter
from pipeline_stages._connectors.sources.kafka import KafkaStreamReader, KafkaUnreachableError


def record(message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord("sluice.kafka.client", logging.WARNING, "x", 1, message, args, None)


def test_a_repeated_client_message_passes_once_a_minute_and_says_how_many_were_held() -> None:
    now = [0.0]
    repeats = RepeatFilter(interval_s=60, clock=lambda: now[0])
    refused = "%s [%s] Connect to ipv4#127.0.0.1:%d failed: Connection refused (after %dms)"
    passed = []
    for attempt in range(500):
        now[0] = attempt * 0.1  # librdkafka's reconnect backoff starts at 100 ms
        line = record(refused, "FAIL", "rdkafka#consumer-1", 9092, attempt % 7)
        if repeats.filter(line):
            passed.append(line.getMessage())
    assert len(passed) == 1  # 50 s of reconnects: one line
    now[0] = 61.0
    line = record(refused, "FAIL", "rdkafka#consumer-2", 9092, 3)
    assert repeats.filter(line)
    assert line.getMessage().endswith("(499 more like it in the last 60 s)")
    assert repeats.filter(record("another message"))  # distinct messages are never held


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unreachable_brokers_fail_the_read_with_what_to_check() -> None:
    servers = f"127.0.0.1:{closed_port()}"
    reader = KafkaStreamReader(
        {"clientconfigsecret": json.dumps({"bootstrap.servers": servers}), "topics": '["t"]'}
    )
    try:
        with pytest.raises(KafkaUnreachableError) as failure:
            reader.initialOffset()
    finally:
        reader.stop()
    message = str(failure.value)
    assert message.startswith(f"the Kafka brokers at {servers} did not answer within 10 s (")
    assert "check the connection's bootstrapServers" in message
    assert "KafkaError{" not in message
