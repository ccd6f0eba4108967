"""The Kafka connector end to end: noida-db broker, the shared SparkSession, real queries.

Every test uses its own topics and checkpoint; micro-batches are driven by polling progress
(`kafka_runs`). Volumes are small: each query costs a Python worker start-up.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._connectors.sinks.kafka import (
    HEADER_BATCH_ID,
    HEADER_OUTPUT_ID,
    KafkaEmitWriter,
)
from pipeline_stages._connectors.sources.ingest import INVALID_JSON
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._windowing.batch.engine import ENGINE_CONF
from pipeline_stages._windowing.spark.unstamped import UNSTAMPED_CONF
from service.manager.source_lag import kafka_lag
from tests.conformance.spark_executor import spark_confs
from tests.integration.kafka_runs import CONNECTION, KafkaRun, drop_last_commit
from tests.kafka_broker import KafkaBroker

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

#: Event times are recent, on a whole minute: brokers apply time-based retention, and noida-db
#: treats records with timestamps far in the past as already deleted.
BASE_MS = (int(time.time()) // 60 - 60) * 60_000


def date(ms: int) -> dict[str, str]:
    from pipeline_stages._documents.values import format_iso_date, to_datetime_ms

    return {"$date": format_iso_date(to_datetime_ms(BASE_MS + ms))}


def source(topic: str, **config: Any) -> dict[str, Any]:
    return {
        "$source": {
            "connectionName": CONNECTION,
            "topic": topic,
            "config": {"auto_offset_reset": "earliest", **config},
        }
    }


def test_three_partitions_stateless_exact_results_meta_and_dlq(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(3)
    for p in range(3):
        values = [json.dumps({"p": p, "i": i, "v": i * 1.5}) for i in range(3)]
        keys = [f"k{p}{i}".encode() for i in range(3)]
        if p == 1:
            values.append("not json")  # offset 3 of partition 1
            keys.append(b"bad-json")
        if p == 2:
            values.append(json.dumps({"p": 2, "i": 3, "v": 0}))  # a key that is not UTF-8
            keys.append(b"\xff")
        stamps = [BASE_MS + 1000 * p + i for i in range(len(values))]
        kafka_broker.produce(
            topic, values, partition=p, keys=keys, timestamps_ms=stamps, headers=[("h", b"\x01")]
        )
    pipeline = [
        source(topic, keyFormat="string"),
        {"$match": {"i": {"$lt": 2}}},
        {"$addFields": {"w": {"$multiply": ["$v", 2]}}},
    ]
    run = KafkaRun(spark, pipeline, kafka_broker.bootstrap, tmp_path / "cp")
    try:
        run.wait_consumed(topic, {0: 3, 1: 4, 2: 4})
    finally:
        run.stop()
    got = sorted(run.collector.outputs, key=lambda d: (d["p"], d["i"]))
    header = [{"k": "h", "v": {"$binary": {"base64": "AQ==", "subType": "00"}}}]
    assert got == [
        {
            "p": p,
            "i": i,
            "v": i * 1.5,
            "w": i * 3.0,
            "_ts": date(1000 * p + i),
            "_stream_meta": {
                "source": {
                    "type": "kafka",
                    "topic": topic,
                    "partition": p,
                    "offset": i,
                    "key": f"k{p}{i}",
                    "headers": header,
                }
            },
        }
        for p in range(3)
        for i in range(2)
    ]
    # Doubles stay doubles through the source: 1.5 * 2 is 3.0, not 3.
    assert isinstance(got[1]["w"], float)
    dlq = sorted(run.collector.dlq, key=lambda d: d["_stream_meta"]["source"]["partition"])
    assert [d["operatorName"] for d in dlq] == ["SourceOperator", "SourceOperator"]
    assert dlq[0]["errInfo"]["reason"] == INVALID_JSON and dlq[0]["doc"] == "not json"
    assert dlq[0]["_stream_meta"]["source"]["offset"] == 3
    assert dlq[1]["errInfo"]["reason"].startswith("Failed to process input document with error: ")
    assert "not a valid string" in dlq[1]["errInfo"]["reason"]


def test_replay_is_deterministic_and_max_offsets_bounds_batches(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(2)
    for p in range(2):
        kafka_broker.produce(topic, [json.dumps({"p": p, "i": i}) for i in range(10)], partition=p)
    pipeline = [source(topic, maxOffsetsPerTrigger=6)]
    checkpoint = tmp_path / "cp"
    first = KafkaRun(spark, pipeline, kafka_broker.bootstrap, checkpoint)
    try:
        first.wait_consumed(topic, {0: 10, 1: 10})
    finally:
        first.stop()
    sizes = [p["numInputRows"] for p in first.progress() if p["numInputRows"]]
    assert sizes == [6, 6, 6, 2]
    # The stats' source lag: what each batch left on the broker, per partition.
    lags = [kafka_lag(p["sources"][0]) for p in first.progress() if p["numInputRows"]]
    assert [lag["totalLag"] if lag else None for lag in lags] == [14, 8, 2, 0]
    assert lags[0] is not None
    assert [row["latestOffset"] for row in lags[0]["partitions"]] == [10, 10]
    assert sum(row["processedOffset"] for row in lags[0]["partitions"]) == 6
    # A crash after the last batch was planned but before it committed: it runs again.
    replayed = drop_last_commit(checkpoint)
    original = next(b for b in first.collector.batches if b.batch_id == replayed)
    for p in range(2):
        kafka_broker.produce(
            topic, [json.dumps({"p": p, "i": i}) for i in range(10, 13)], partition=p
        )
    second = KafkaRun(spark, pipeline, kafka_broker.bootstrap, checkpoint)
    try:
        second.wait_consumed(topic, {0: 13, 1: 13})
    finally:
        second.stop()
    again = next(b for b in second.collector.batches if b.batch_id == replayed)
    assert [o.key for o in again.outputs] == [o.key for o in original.outputs]
    assert [o.doc_json for o in again.outputs] == [o.doc_json for o in original.outputs]
    # No loss, no duplicates apart from the replayed batch.
    seen = [
        (d["p"], d["i"])
        for run in (first, second)
        for b in run.collector.batches
        if not (run is second and b.batch_id == replayed)
        for d in (json.loads(o.doc_json) for o in b.outputs)
    ]
    assert sorted(seen) == [(p, i) for p in range(2) for i in range(13)]
    assert max(p["numInputRows"] for p in second.progress()) <= 6


WINDOW = {
    "$tumblingWindow": {
        "interval": {"size": 1, "unit": "second"},
        "allowedLateness": 0,
        "pipeline": [{"$group": {"_id": None, "n": {"$count": {}}, "ids": {"$push": "$i"}}}],
    }
}
#: Event times (ms after BASE_MS) in arrival order; 200, 900 and 1000 arrive late.
STAMPS = [0, 300, 1200, 200, 1500, 2100, 900, 2500, 3300, 3100, 4200, 1000, 4800, 5100, 5900, 20_000]  # fmt: skip


def _window_run(spark: Any, broker: KafkaBroker, topic: str, batch: int, where: Path) -> Any:
    run = KafkaRun(
        spark, [source(topic, maxOffsetsPerTrigger=batch), WINDOW], broker.bootstrap, where
    )
    try:
        run.wait_consumed(topic, {0: len(STAMPS)})
    finally:
        run.stop()
    outputs = sorted(
        run.collector.outputs, key=lambda d: d["_stream_meta"]["window"]["start"]["$date"]
    )
    dlq = sorted(
        (d["doc"]["i"], d["errInfo"]["reason"], d["operatorName"], d["missedWindowStartTimes"])
        for d in run.collector.dlq
    )
    batches = sum(1 for p in run.progress() if p["numInputRows"])
    return outputs, dlq, batches


def test_the_engines_read_unstamped_kafka_documents_and_stamp_late_copies(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(1)
    values = [json.dumps({"i": i, "_stream_meta": {"mine": i}}) for i in range(len(STAMPS))]
    kafka_broker.produce(topic, values, partition=0, timestamps_ms=[BASE_MS + t for t in STAMPS])
    runs = {  # the reference stamps every document in Spark
        "stamped": {ENGINE_CONF: "operator", UNSTAMPED_CONF: "false"},
        "operator": {ENGINE_CONF: "operator"},
        "batch": {ENGINE_CONF: "batch"},
    }
    found = {}
    for name, conf in runs.items():
        with spark_confs(spark, conf):
            run = KafkaRun(spark, [source(topic), WINDOW], kafka_broker.bootstrap, tmp_path / name)
        try:
            run.wait_consumed(topic, {0: len(STAMPS)})
        finally:
            run.stop()
        window = run.compiled.batch_window
        dlq = [
            {k: v for k, v in d.items() if k not in ("_id", "dlqTime")} for d in run.collector.dlq
        ]
        found[name] = (run.collector.outputs, dlq, window and window.stamp)
    assert found["batch"][2] == ("_ts", "_stream_meta")
    assert found["operator"][:2] == found["stamped"][:2]
    assert found["batch"][:2] == found["stamped"][:2]
    for name in runs:  # the field order too
        assert json.dumps(found[name][1]) == json.dumps(found["stamped"][1]), name
    late = [d["doc"] for d in found["operator"][1]]
    assert [d["i"] for d in late] == [3, 6, 11]
    # Stamped as the source stamps: the event time, the Kafka metadata merged into theirs.
    assert late[0]["_ts"] == date(200)
    assert late[0]["_stream_meta"]["mine"] == 3
    assert late[0]["_stream_meta"]["source"]["offset"] == 3


def test_tumbling_window_results_do_not_depend_on_batch_size(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(1)
    values = [json.dumps({"i": i}) for i in range(len(STAMPS))]
    kafka_broker.produce(topic, values, partition=0, timestamps_ms=[BASE_MS + t for t in STAMPS])
    small = _window_run(spark, kafka_broker, topic, 3, tmp_path / "small")
    large = _window_run(spark, kafka_broker, topic, 1000, tmp_path / "large")
    assert small[2] >= 6 and large[2] == 1
    assert small[:2] == large[:2]
    outputs, dlq, _ = large
    assert [(o["_stream_meta"]["window"]["start"], o["n"], o["ids"]) for o in outputs] == [
        (date(0), 2, [0, 1]),
        (date(1000), 2, [2, 4]),
        (date(2000), 2, [5, 7]),
        (date(3000), 2, [8, 9]),
        (date(4000), 2, [10, 12]),
        (date(5000), 2, [13, 14]),
    ]
    assert outputs[0]["_stream_meta"]["source"] == {"type": "kafka"}
    assert [(i, reason, op, missed) for i, reason, op, missed in dlq] == [
        (3, "Input document arrived late.", "GroupOperator", [date(0)]),
        (6, "Input document arrived late.", "GroupOperator", [date(0)]),
        (11, "Input document arrived late.", "GroupOperator", [date(1000)]),
    ]


def test_silent_partition_holds_the_watermark_until_partition_idle_timeout(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(2)
    kafka_broker.produce(topic, ['{"i": 0}'], partition=1, timestamps_ms=[BASE_MS + 200])
    kafka_broker.produce(topic, ['{"i": 1}', '{"i": 2}'], partition=0, timestamps_ms=[BASE_MS + 100, BASE_MS + 5000])  # fmt: skip
    body = {**source(topic)["$source"], "partitionIdleTimeout": {"size": 2, "unit": "second"}}
    run = KafkaRun(spark, [{"$source": body}, WINDOW], kafka_broker.bootstrap, tmp_path / "cp")
    try:
        run.wait_consumed(topic, {0: 2, 1: 1})
        consumed = int(run.query.lastProgress["batchId"])
        stats = [s for b in run.collector.batches if b.batch_id == consumed for s in b.stats]
        # Watermark = min over partitions (partition 1: 200 - 1 ms), not partition 0's 4999.
        assert [s["watermark"] for s in stats] == [date(199)]
        assert run.collector.outputs == []
        # Partition 0 keeps producing (one record per micro-batch, well within the timeout);
        # once partition 1 has been silent for 2 s, partition 0 alone moves the watermark.
        fed = [2]

        def keep_partition_0_busy() -> bool:
            if run.collector.outputs:
                return True
            if run.consumed(topic, {0: fed[0], 1: 1}):
                stamp = BASE_MS + 5000 + fed[0]
                kafka_broker.produce(topic, [f'{{"i": {10 + fed[0]}}}'], partition=0, timestamps_ms=[stamp])  # fmt: skip
                fed[0] += 1
            return False

        run.wait(keep_partition_0_busy, "the window closed by partition idleness", 90)
    finally:
        run.stop()
    (result,) = run.collector.outputs
    assert result["_stream_meta"]["window"]["start"] == date(0)
    assert (result["n"], sorted(result["ids"])) == (2, [0, 1])


def test_partition_idleness_closes_a_window_in_a_batch_without_input(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = kafka_broker.create_topic(2)
    kafka_broker.produce(topic, ['{"i": 0}'], partition=1, timestamps_ms=[BASE_MS + 200])
    kafka_broker.produce(topic, ['{"i": 1}'], partition=0, timestamps_ms=[BASE_MS + 100])
    idle_s = 10  # far longer than the next step takes, so partition 1 is still active then
    body = {**source(topic)["$source"], "partitionIdleTimeout": {"size": idle_s, "unit": "second"}}
    run = KafkaRun(spark, [{"$source": body}, WINDOW], kafka_broker.bootstrap, tmp_path / "cp")
    try:
        run.wait_consumed(topic, {0: 1, 1: 1})
        started = time.monotonic()
        # Partition 0 moves on once more, in a later micro-batch, and then nothing arrives.
        # Partition 1 turns idle first: partition 0 alone then sets the watermark (4999 ms),
        # which closes [0, 1 s). Only the operator's timeout can make that happen.
        kafka_broker.produce(topic, ['{"i": 2}'], partition=0, timestamps_ms=[BASE_MS + 5000])
        run.wait_consumed(topic, {0: 2, 1: 1})
        assert time.monotonic() - started < idle_s, "the test's premise: partition 1 not idle yet"
        assert run.collector.outputs == []
        run.wait(lambda: bool(run.collector.outputs), "the window closed by partition idleness")
        (closing,) = [b.batch_id for b in run.collector.batches if b.outputs]

        def input_rows() -> dict[int, int]:
            return {int(p["batchId"]): int(p["numInputRows"]) for p in run.progress()}

        run.wait(lambda: closing in input_rows(), f"the progress of micro-batch {closing}")
    finally:
        run.stop()
    (result,) = run.collector.outputs
    assert result["_stream_meta"]["window"]["start"] == date(0)
    assert (result["n"], sorted(result["ids"])) == (2, [0, 1])
    assert input_rows()[closing] == 0


@dataclass(frozen=True)
class _Targeted:
    doc_json: str
    key: str
    target: dict[str, Any]


@dataclass
class _UpstreamKey:
    """Stands for `sinks.targets`: puts the `$k` key expression's value in `Output.target`."""

    writer: KafkaEmitWriter

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        outputs = []
        for o in batch.outputs:
            doc = json.loads(o.doc_json)
            outputs.append(_Targeted(o.doc_json, o.key, {"key": doc["k"]} if "k" in doc else {}))
        return self.writer.write(BatchResult(batch.batch_id, outputs=outputs))  # type: ignore[arg-type]


def test_emit_to_kafka_round_trip_with_key_headers_and_dlq(
    spark: Any, kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    src = kafka_broker.create_topic(1)
    out = kafka_broker.create_topic(1)
    kafka_broker.produce(
        src, ['{"k": "a", "n": 1}', '{"k": "b", "n": 2}', '{"k": 7, "n": 3}'], partition=0
    )
    emit = {
        "topic": out,
        "config": {"key": "$k", "keyFormat": "string", "headers": {"app": "sluice"}},
    }
    writer = KafkaEmitWriter(emit, type("C", (), {"config": kafka_broker.connection_config()})(), "emit-test")  # fmt: skip
    pipeline = [source(src), {"$project": {"_id": 0, "k": 1, "n2": {"$multiply": ["$n", 2]}}}]
    run = KafkaRun(spark, pipeline, kafka_broker.bootstrap, tmp_path / "cp", forward=_UpstreamKey(writer))  # fmt: skip
    try:
        run.wait_consumed(src, {0: 3})
    finally:
        run.stop()
        writer.close()
    messages = kafka_broker.read_all(out, 2)
    assert [(m.key, json.loads(m.value or b"")) for m in messages] == [
        (b"a", {"k": "a", "n2": 2}),
        (b"b", {"k": "b", "n2": 4}),
    ]
    headers = [dict(m.headers) for m in messages]
    assert all(h["app"] == b"sluice" and h["sluice-processor"] == b"emit-test" for h in headers)
    batch_outputs = [o for b in run.collector.batches for o in b.outputs]
    assert [h[HEADER_OUTPUT_ID].decode() for h in headers] == [o.key for o in batch_outputs[:2]]
    assert all(h[HEADER_BATCH_ID].isdigit() for h in headers)
    (dead,) = run.collector.sink_dlq
    assert dead["operatorName"] == "EmitOperator" and dead["doc"] == {"k": 7, "n2": 6}
    assert "keyFormat string" in dead["errInfo"]["reason"]
