"""Where an `HttpIngest` or `Kafka` source starts: pinned once per checkpoint.

Spark checkpoints the offsets of every batch but not a Python source's *initial* offset: a
query whose first batch never committed (it failed, or the service was killed) asks the
source for its initial offset again when it restarts. For an `HttpIngest` source that would
be "the spool's end now", silently skipping what arrived in between. So the start position
(the spool's end when the processor first started on this checkpoint) is written next to
the checkpoint, durably, and handed to the compiler as `startSeq` in the connection config
for every later start on the same checkpoint. A `Kafka` source reading from `latest` is
pinned the same way: the topics' end offsets when the processor first started, handed over
as `startOffsets` (Spark's JSON form).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from service.runtime.engine import Connection
from service.stores import Spool

START_FILE = "sluice-source-start.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}


def _write_durably(path: Path, positions: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(".tmp")
    with open(temp, "w", encoding="utf-8") as fh:
        json.dump(dict(positions), fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(temp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def source_connection(pipeline: Any) -> str | None:
    """The `$source.connectionName` of a raw pipeline, if any."""
    first = pipeline[0] if isinstance(pipeline, list) and pipeline else None
    source = first.get("$source") if isinstance(first, dict) else None
    name = source.get("connectionName") if isinstance(source, dict) else None
    return name if isinstance(name, str) else None


def pin_start_positions(
    pipeline: Any,
    connections: Mapping[str, Connection],
    *,
    checkpoint_dir: Path,
    spool: Spool,
) -> dict[str, Connection]:
    """The run's connections, the `HttpIngest` source's carrying its pinned `startSeq`."""
    out = dict(connections)
    name = source_connection(pipeline)
    connection = out.get(name) if name else None
    if name is None or connection is None or connection.type not in ("HttpIngest", "Kafka"):
        return out
    path = checkpoint_dir / START_FILE
    positions = _read(path)
    if name not in positions:
        start = (
            spool.latest_seq(name)
            if connection.type == "HttpIngest"
            else kafka_start_offsets(pipeline, connection)
        )
        if start is None:
            return out
        positions[name] = start
        _write_durably(path, positions)
    key = "startSeq" if connection.type == "HttpIngest" else "startOffsets"
    out[name] = Connection(name, connection.type, {**connection.config, key: positions[name]})
    return out


def kafka_start_offsets(pipeline: Any, connection: Connection) -> str | None:
    """`"earliest"`, or the topics' end offsets now as Spark's JSON; None if unreachable.

    Unpinned (None), the compiler resolves `latest` itself when the query starts, which is
    only unsafe if the service dies before the first micro-batch commits.
    """
    source = pipeline[0]["$source"]
    config = source.get("config") if isinstance(source.get("config"), dict) else {}
    if config.get("auto_offset_reset", "latest") in ("earliest", "beginning", "smallest"):
        return "earliest"
    topic = source.get("topic")
    topics = [topic] if isinstance(topic, str) else [t for t in topic or [] if isinstance(t, str)]
    try:
        from pipeline_stages._connectors.kafka_conf import client_config
        from pipeline_stages._connectors.sources.kafka import KafkaStreamReader

        probe = KafkaStreamReader(
            {
                "clientconfigsecret": json.dumps(client_config(connection.config)),
                "topics": json.dumps(topics),
            }
        )
    except (ImportError, ValueError):
        return None
    try:
        return json.dumps(probe.watermarks("latest"))
    except Exception:  # noqa: BLE001 - an unreachable broker: leave it to the compiler
        return None
    finally:
        probe.stop()
