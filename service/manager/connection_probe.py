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

from pipeline_stages._connectors.kafka_conf import client_config, setting_text

log = logging.getLogger("sluice.kafka")

#: Longest metadata wait a request may ask for.
MAX_TIMEOUT_S = 60.0


def _quiet_logger() -> logging.Logger:
    quiet = logging.getLogger("sluice.kafka.client")
    quiet.setLevel(logging.DEBUG)
    quiet.propagate = False  # librdkafka retries every broker: keep them out of the service log
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())  # else logging's last resort prints them
    return quiet


def probe_kafka(config: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
    """`{ok, brokers, topics, elapsedMs}` or `{ok: false, error: {code, message}, elapsedMs}`.

    Fails early when the client reports that every broker is down, the name does not resolve
    or authentication failed, rather than waiting out `timeout_s`.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    fatal_codes = {
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
    }
    reported: list[Any] = []
    conf: dict[str, Any] = {
        **client_config(config),
        "socket.connection.setup.timeout.ms": str(max(1000, int(timeout_s * 1000))),
        "error_cb": reported.append,
    }
    started = time.monotonic()
    deadline = started + timeout_s
    try:
        admin = AdminClient(conf, logger=_quiet_logger())
    except KafkaException as error:  # librdkafka refused the settings before connecting
        return _invalid_settings(error.args[0] if error.args else error, started)
    while True:
        remaining = deadline - time.monotonic()
        try:
            metadata = admin.list_topics(timeout=max(0.05, min(_STEP_S, remaining)))
            break
        except KafkaException as error:
            admin.poll(0)  # serves error_cb: the client reports broker errors only there
            fatal = [e for e in reported if e.code() in fatal_codes]
            if fatal or remaining <= _STEP_S:
                cause: Any = fatal[-1] if fatal else (error.args[0] if error.args else None)
                return _failure(conf["bootstrap.servers"], cause, timeout_s, started)
    topics = sorted(name for name in metadata.topics if not name.startswith("__"))
    brokers = sorted(f"{b.host}:{b.port}" for b in metadata.brokers.values())
    return {"ok": True, "brokers": brokers, "topics": topics, **_elapsed(started)}


def settings_problems(config: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """What librdkafka refuses in a Kafka connection's settings, without connecting:
    `(location in the connection, message)` per problem.

    Each `config` entry is checked alone first (an unknown property or a value of the wrong
    kind, located at `config.<key>`), then the whole client configuration (settings that
    need each other, e.g. a SASL mechanism without credentials, located at the connection).
    A client built without `bootstrap.servers` opens no connection: this takes microseconds.
    """
    from confluent_kafka import KafkaException, Producer

    def refusal(conf: dict[str, str]) -> str | None:
        try:
            Producer(conf, logger=_quiet_logger()).flush(0)
        except KafkaException as error:
            return _error_parts(error.args[0] if error.args else error)[1]
        return None

    found: list[tuple[tuple[str, ...], str]] = []
    for key, value in (config.get("config") or {}).items():
        if (message := refusal({str(key): setting_text(value)})) is not None:
            found.append(
                (("config", str(key)), f"the Kafka client refuses this setting: {message}")
            )
    if not found:
        whole = {k: v for k, v in client_config(config).items() if k != "bootstrap.servers"}
        if (message := refusal(whole)) is not None:
            found.append(((), f"the Kafka client refuses these settings: {message}"))
    return found


#: How long one metadata attempt waits before the errors reported so far are looked at.
_STEP_S = 0.5


def _error_parts(cause: Any) -> tuple[str, str]:
    """`(code, text)` of a `KafkaError` (or of whatever else a client raised)."""
    code = str(cause.name()) if hasattr(cause, "name") else "KAFKA_ERROR"
    text = str(cause.str()) if hasattr(cause, "str") else str(cause)
    return code, text


def _failure(servers: str, cause: Any, timeout_s: float, started: float) -> dict[str, Any]:
    code, text = _error_parts(cause)
    message = (
        f"the brokers at {servers} did not answer (waited at most {timeout_s:g} s; {code}: "
        f"{text}); "
        "check bootstrapServers, that the brokers are up and reachable from this service, and "
        "the connection's security and authentication settings"
    )
    log.debug("Kafka connection test failed: %s", text)
    return {"ok": False, "error": {"code": code, "message": message}, **_elapsed(started)}


def _invalid_settings(cause: Any, started: float) -> dict[str, Any]:
    code, text = _error_parts(cause)
    message = (
        f"the Kafka client refused the connection's settings ({code}: {text}); fix the "
        "connection's config (its keys are librdkafka client properties)"
    )
    return {"ok": False, "error": {"code": code, "message": message}, **_elapsed(started)}


def _elapsed(started: float) -> dict[str, int]:
    return {"elapsedMs": int((time.monotonic() - started) * 1000)}
