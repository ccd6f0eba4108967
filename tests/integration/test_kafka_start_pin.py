"""The service pins a Kafka `$source`'s start per checkpoint (real noida-db broker, no JVM).

Spark does not checkpoint a Python source's initial offset: without the pin, a processor
started on `latest` whose first micro-batch never committed would ask for `latest` again on
restart and skip what arrived in between.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from service.manager.positions import START_FILE, pin_start_positions
from service.runtime.engine import Connection
from service.stores import Spool
from tests.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka


def test_latest_is_pinned_to_the_end_offsets_at_first_start(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(partitions=2, prefix="pin")
    kafka_broker.produce(topic, ["{}", "{}", "{}"], partition=0)
    connections = {"k": Connection("k", "Kafka", kafka_broker.connection_config())}
    pipeline = [{"$source": {"connectionName": "k", "topic": topic}}]
    spool = Spool(tmp_path / "spool")

    first = pin_start_positions(pipeline, connections, checkpoint_dir=tmp_path / "c1", spool=spool)
    assert json.loads(first["k"].config["startOffsets"]) == {topic: {"0": 3, "1": 0}}

    kafka_broker.produce(topic, ["{}"], partition=1)  # arrives before a restart
    again = pin_start_positions(pipeline, connections, checkpoint_dir=tmp_path / "c1", spool=spool)
    assert again["k"].config["startOffsets"] == first["k"].config["startOffsets"]
    assert (tmp_path / "c1" / START_FILE).is_file()

    fresh = pin_start_positions(pipeline, connections, checkpoint_dir=tmp_path / "c2", spool=spool)
    assert json.loads(fresh["k"].config["startOffsets"]) == {topic: {"0": 3, "1": 1}}


def test_earliest_is_pinned_as_earliest(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    connections = {"k": Connection("k", "Kafka", kafka_broker.connection_config())}
    pipeline = [
        {
            "$source": {
                "connectionName": "k",
                "topic": "any",
                "config": {"auto_offset_reset": "earliest"},
            }
        }
    ]
    pinned = pin_start_positions(
        pipeline, connections, checkpoint_dir=tmp_path / "c", spool=Spool(tmp_path / "spool")
    )
    assert pinned["k"].config["startOffsets"] == "earliest"
