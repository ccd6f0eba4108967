"""`$emit` to Kafka without a broker: serialisation, dedupe headers, DLQ, at-least-once."""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline_stages._connectors.sinks import kafka_format as KF
from pipeline_stages._connectors.sinks.kafka import (
    HEADER_BATCH_ID,
    HEADER_OUTPUT_ID,
    KafkaEmitWriter,
    kafka_names,
)
from pipeline_stages._connectors.sinks.panes import (
    HEADER_PANE_INDEX,
    HEADER_PANE_TIMING,
    HEADER_RETRACTION,
)
from pipeline_stages._stream.batch import BatchResult, Output

CONNECTION = type("Conn", (), {"config": {"bootstrapServers": "h:1"}})()
NOW = datetime(2024, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Targeted:
    """An output with per-document values computed upstream (`Output.target`)."""

    doc_json: str
    key: str
    target: dict[str, Any] | None = None


class FakeError:
    def __init__(self, code: int, text: str) -> None:
        self._code, self._text = code, text

    def code(self) -> int:
        return self._code

    def fatal(self) -> bool:
        return False

    def str(self) -> str:
        return self._text

    def __str__(self) -> str:
        return self._text


class FakeProducer:
    """Records produce calls; refuses topics named in `refuse` at delivery."""

    def __init__(self, conf: dict[str, str], refuse: dict[str, int] | None = None) -> None:
        self.conf = conf
        self.sent: list[dict[str, Any]] = []
        self.refuse = refuse or {}
        self._pending: list[tuple[Any, str]] = []

    def produce(self, *, topic: str, key: Any, value: Any, headers: Any, on_delivery: Any) -> None:
        self.sent.append({"topic": topic, "key": key, "value": value, "headers": headers})
        self._pending.append((on_delivery, topic))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        for report, topic in self._pending:
            code = self.refuse.get(topic)
            report(FakeError(code, f"refused {topic}") if code is not None else None, None)
        self._pending.clear()
        return 0


def writer(body: dict[str, Any], refuse: dict[str, int] | None = None) -> tuple[KafkaEmitWriter, list[FakeProducer]]:  # fmt: skip
    made: list[FakeProducer] = []

    def factory(conf: dict[str, str]) -> FakeProducer:
        made.append(FakeProducer(conf, refuse))
        return made[-1]

    w = KafkaEmitWriter(body, CONNECTION, "p1", producer_factory=factory, clock=lambda: NOW)
    return w, made


def test_messages_carry_value_key_and_dedupe_headers() -> None:
    w, made = writer(
        {"topic": "out", "config": {"key": "k1", "keyFormat": "string", "headers": {"app": "x"}}}
    )
    batch = BatchResult(
        batch_id=7, outputs=[Output('{"a":1.0}', "id-a"), Output('{"a":2}', "id-b")]
    )
    assert w.write(batch) == []
    (producer,) = made
    assert producer.conf["acks"] == "all" and producer.conf["enable.idempotence"] == "true"
    first = producer.sent[0]
    assert first["topic"] == "out" and first["key"] == b"k1" and first["value"] == b'{"a":1.0}'
    headers = dict(first["headers"])
    assert headers["app"] == b"x" and headers[HEADER_BATCH_ID] == b"7"
    assert headers[HEADER_OUTPUT_ID] == b"id-a"
    # A replayed batch sends the same output ids: consumers deduplicate on them.
    w.write(batch)
    assert [dict(m["headers"])[HEADER_OUTPUT_ID] for m in producer.sent] == [b"id-a", b"id-b"] * 2


def test_computed_values_come_from_target_and_bad_ones_go_to_the_dlq() -> None:
    body = {
        "topic": "$t",
        "config": {"key": "$id", "keyFormat": "int", "tombstoneWhen": "$gone"},
    }
    assert set(kafka_names(body)) == {"topic", "key", "tombstoneWhen"}
    w, made = writer(body)
    outputs = [
        Targeted('{"id":1}', "a", {"topic": "t1", "key": 1, "tombstoneWhen": False}),
        Targeted('{"id":2}', "b", {"topic": "t1", "key": 2, "tombstoneWhen": True}),
        Targeted('{"id":"x"}', "c", {"topic": "t1", "key": "x"}),
        Targeted('{"id":4}', "d", {"topic": 5, "key": 4}),
        Targeted('{"id":5}', "e", {"topic": "t1", "key": 5, "tombstoneWhen": "yes"}),
    ]
    dlq = w.write(BatchResult(batch_id=1, outputs=outputs))  # type: ignore[arg-type]
    sent = made[0].sent
    assert [(m["key"], m["value"]) for m in sent] == [
        (struct.pack(">i", 1), b'{"id":1}'),
        (struct.pack(">i", 2), None),  # a tombstone
    ]
    assert [d["doc"]["id"] for d in dlq] == ["x", 4, 5]
    assert {d["operatorName"] for d in dlq} == {"EmitOperator"}
    reasons = [d["errInfo"]["reason"] for d in dlq]
    assert reasons[0].startswith("Failed to process input document in EmitOperator with error:")
    assert "keyFormat int" in reasons[0] and "topic" in reasons[1] and "boolean" in reasons[2]


def test_refused_messages_go_to_the_dlq_and_unreachable_clusters_fail_the_batch() -> None:
    w, _ = writer({"topic": "$t"}, refuse={"big": 10})
    outputs = [
        Targeted('{"n":1}', "a", {"topic": "ok"}),
        Targeted('{"n":2}', "b", {"topic": "big"}),
    ]
    dlq = w.write(BatchResult(batch_id=0, outputs=outputs))  # type: ignore[arg-type]
    assert [d["doc"] for d in dlq] == [{"n": 2}]
    w, _ = writer({"topic": "down"}, refuse={"down": -192})  # _MSG_TIMED_OUT
    with pytest.raises(RuntimeError, match="unacknowledged"):
        w.write(BatchResult(batch_id=0, outputs=[Output('{"n":1}', "a")]))


@pytest.mark.parametrize(
    ("value", "fmt", "encoded"),
    [
        ({"$binary": {"base64": "AQI=", "subType": "00"}}, "binData", b"\x01\x02"),
        ("é", "string", "é".encode()),
        (
            {"a": [1, {"$date": "2024-01-01T00:00:00.000Z"}]},
            "json",
            b'{"a":[1,{"$date":"2024-01-01T00:00:00.000Z"}]}',
        ),  # fmt: skip
        (-1, "int", b"\xff\xff\xff\xff"),
        (2**40, "long", struct.pack(">q", 2**40)),
        (None, "int", None),
    ],
)
def test_keys_encode_per_key_format(value: Any, fmt: str, encoded: bytes | None) -> None:
    assert KF.encode_key(value, fmt) == encoded


@pytest.mark.parametrize(("value", "fmt"), [("a", "binData"), (1, "string"), (2**31, "int"), (True, "long"), (1.5, "int")])  # fmt: skip
def test_keys_that_do_not_fit_their_format_raise(value: Any, fmt: str) -> None:
    with pytest.raises(KF.EmitValueError):
        KF.encode_key(value, fmt)


def test_headers_accept_objects_and_kv_arrays() -> None:
    assert KF.encode_headers({"a": "x", "b": 1, "c": None}) == [
        ("a", b"x"),
        ("b", b"1"),
        ("c", None),
    ]
    assert KF.encode_headers([{"k": "a", "v": {"$binary": {"base64": "AQ==", "subType": "00"}}}]) == [("a", b"\x01")]  # fmt: skip
    with pytest.raises(KF.EmitValueError):
        KF.encode_headers("nope")


def test_output_formats_and_iso_dates() -> None:
    doc = '{"n":1,"d":1.0,"t":{"$date":"2024-01-01T00:00:00.000Z"}}'
    relaxed = KF.encode_value(doc, output_format="relaxedJson", date_format="default")
    assert relaxed == doc.encode()
    canonical = json.loads(
        KF.encode_value(doc, output_format="canonicalJson", date_format="default")
    )
    assert canonical == {
        "n": {"$numberInt": "1"},
        "d": {"$numberDouble": "1.0"},
        "t": {"$date": {"$numberLong": "1704067200000"}},
    }
    iso = json.loads(KF.encode_value(doc, output_format="relaxedJson", date_format="ISO8601"))
    assert iso == {"n": 1, "d": 1.0, "t": "2024-01-01T00:00:00.000Z"}
    both = json.loads(KF.encode_value(doc, output_format="canonicalJson", date_format="ISO8601"))
    assert both == {
        "n": {"$numberInt": "1"},
        "d": {"$numberDouble": "1.0"},
        "t": "2024-01-01T00:00:00.000Z",
    }


def pane_result(index: int, timing: str, *, retraction: bool = False, meta: str = "_stream_meta") -> str:  # fmt: skip
    pane: dict[str, Any] = {"index": index, "timing": timing}
    if retraction:
        pane["retraction"] = True
    window = {"start": "2024-01-01T00:00:00Z", "end": "2024-01-01T00:00:10Z", "pane": pane}
    return json.dumps({"_id": "a", "n": 2, meta: {"window": window}})


def test_a_panes_results_and_retractions_carry_pane_headers_and_others_none() -> None:
    w, made = writer({"topic": "out"})
    outputs = [
        Output(pane_result(0, "EARLY"), "early"),
        Output(pane_result(1, "ON_TIME", retraction=True), "retract"),
        Output(pane_result(1, "ON_TIME", meta="origin"), "on-time"),
        Output('{"_id": "a", "pane": 3}', "plain"),
    ]
    assert w.write(BatchResult(batch_id=1, outputs=outputs)) == []
    (producer,) = made
    sent = [dict(m["headers"]) for m in producer.sent]
    panes = [
        (h.get(HEADER_PANE_INDEX), h.get(HEADER_PANE_TIMING), h.get(HEADER_RETRACTION))
        for h in sent
    ]
    assert panes == [
        (b"0", b"EARLY", b"false"),
        (b"1", b"ON_TIME", b"true"),
        (b"1", b"ON_TIME", b"false"),
        (None, None, None),
    ]
    # Every pane and retraction is sent, each under its own output id.
    assert [h[HEADER_OUTPUT_ID] for h in sent] == [b"early", b"retract", b"on-time", b"plain"]
