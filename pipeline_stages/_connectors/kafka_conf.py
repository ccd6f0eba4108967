"""librdkafka client settings from a registered `Kafka` connection (shared by source and sink).

A `Kafka` connection's config, as the service stores it, is `{bootstrapServers, security:
{protocol}, authentication: {mechanism, username, password}, config: {<librdkafka key>:
value}}` (see `service.schemas.connections.KafkaConnectionCreate`). `config` entries are
passed through unchanged and win over the derived settings, so anything librdkafka supports
(TLS files, timeouts) can be set on the connection. The result holds secrets: never log it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def client_config(connection_config: Mapping[str, Any]) -> dict[str, str]:
    """librdkafka settings (all values as strings, as Spark options and librdkafka take them)."""
    conf: dict[str, str] = {}
    servers = connection_config.get("bootstrapServers")
    if not servers:
        raise ValueError("the Kafka connection has no bootstrapServers")
    conf["bootstrap.servers"] = str(servers)
    security = connection_config.get("security") or {}
    if security.get("protocol"):
        conf["security.protocol"] = str(security["protocol"])
    auth = connection_config.get("authentication") or {}
    for key, name in (
        ("mechanism", "sasl.mechanism"),
        ("username", "sasl.username"),
        ("password", "sasl.password"),
    ):
        if auth.get(key):
            conf[name] = str(auth[key])
    for key, value in (connection_config.get("config") or {}).items():
        conf[str(key)] = setting_text(value)
    return conf


def setting_text(value: Any) -> str:
    """A `config` value as librdkafka takes it (booleans as `true`/`false`)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
