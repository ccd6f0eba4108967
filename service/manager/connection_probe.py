"""`POST /connections/{name}:test`: is a Kafka connection's cluster reachable, and what is on it.

One metadata request through confluent-kafka (the client the Kafka source and sink use),
bounded by `timeout_s`: the brokers answer (with their topics) or the check says what to fix.
librdkafka's own connection-error log lines go to the `sluice.kafka` logger at debug level,
so a wrong address does not flood the service log.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from pipeline_stages._connectors.kafka_conf import client_config

log = logging.getLogger("sluice.kafka")

#: Longest metadata wait a request may ask for.
MAX_TIMEOUT_S = 60.0


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("sluice.kafka.client")
    quiet.setLevel(logging.DEBUG)
    quiet.propagate = False  # librdkafka retries every broker: keep them out of the service log
    return quiet


def probe_kafka(config: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    """`{ok, brokers, topics, elapsedMs}` or `{ok: false, error: {code, message}, elapsedMs}`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    conf: dict[str, Any] = {
        **client_config(config),
        "socket.connection.setup.timeout.ms": str(max(1000, int(timeout_s * 1000))),
    }
    started = time.monotonic()
    servers = conf["bootstrap.servers"]
    try:
        admin = AdminClient(conf, logger=_quiet_logger())
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as error:
        kafka_error: Any = error.args[0] if error.args else None
        code = str(kafka_error.name()) if hasattr(kafka_error, "name") else "KAFKA_ERROR"
        text = str(kafka_error.str()) if hasattr(kafka_error, "str") else str(error)
        message = (
            f"no answer from the brokers at {servers} within {timeout_s:g} s ({text}); check "
            "bootstrapServers, that the brokers are up and reachable from this service, and "
            "the connection's security and authentication settings"
        )
        log.debug("Kafka connection test failed: %s", text)
        return {"ok": False, "error": {"code": code, "message": message}, **_elapsed(started)}
    topics = sorted(name for name in metadata.topics if not name.startswith("__"))
    brokers = sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values())
    return {"ok": True, "brokers": brokers, "topics": topics, **_elapsed(started)}


def _elapsed(started: float) -> dict[str, int]:
    return {"elapsedMs": int((time.monotonic() - started) * 1000)}
