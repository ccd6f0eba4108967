"""`$emit` to a Kafka topic: `KafkaEmitWriter`, a `BatchWriter` over confluent-kafka.

Interface (for the `$emit` dispatch, `sinks.dispatch`):

    writer = KafkaEmitWriter(options, connection, processor)
    dlq_records = writer.write(batch)   # per BatchResult; list of Atlas DLQ documents
    writer.close()                      # flushes and drops the producer

* `options`: the `$emit` body as Atlas spells it (`KafkaEmitPlan.options`, i.e.
  `EmitSpec.model_dump(by_alias=True)`): `topic`, `config {key, keyFormat, headers,
  outputFormat, dateFormat, compression_type, acks, tombstoneWhen}`.
* `connection`: the `Kafka` connection (anything with a `config` mapping; see `kafka_conf`).
* `processor`: the processor name (DLQ records, the `sluice-processor` header).

Per-document values: a computed `topic` (and `key`, `headers`, `tombstoneWhen` when they are
expressions) is evaluated upstream in Spark (`sinks.targets`, names from `kafka_names`) and
read from `Output.target`; constants are used as written. There is no Python MQL evaluator,
so an expression whose value did not arrive sends the document to the DLQ, naming it.

Delivery is **at-least-once**: `write` returns only once every message is acknowledged
(`flush`); a batch that fails (broker unreachable, timeouts) raises, and Spark replays it
after a restart, sending its messages again. Every message carries headers to deduplicate
by: `sluice-output-id` (the output's deterministic key, the same on replay),
`sluice-batch-id` and `sluice-processor`; a window pane's results (issue 25) also carry
`sluice-pane-index`, `sluice-pane-timing` and `sluice-retraction` (`sinks.panes`). A message the broker refuses for good (too large,
unknown topic), a key that does not serialise (§3.7) or a `tombstoneWhen` that is not a
boolean becomes a DLQ record with `operatorName: "EmitOperator"`; the query carries on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pipeline_stages._connectors.kafka_conf import client_config
from pipeline_stages._connectors.kafka_log import client_logger
from pipeline_stages._connectors.sinks import kafka_format as KF
from pipeline_stages._connectors.sinks.ids import (
    effective_keys,
    sink_dlq_record,
    write_error_reason,
)
from pipeline_stages._connectors.sinks.panes import pane_headers
from pipeline_stages._connectors.sinks.plans import Name, TargetError, resolve_name
from pipeline_stages._stream.batch import BatchResult

OPERATOR = "EmitOperator"
HEADER_OUTPUT_ID = "sluice-output-id"
HEADER_BATCH_ID = "sluice-batch-id"
HEADER_PROCESSOR = "sluice-processor"

#: librdkafka's default (5 min) would hold a failing batch far longer than a restart takes.
_MESSAGE_TIMEOUT_MS = 60_000
#: Delivery errors that mean "the cluster is not reachable": fail the batch, don't DLQ.
_RETRY_CODES = frozenset({-192, -195, -187})  # _MSG_TIMED_OUT, _TRANSPORT, _ALL_BROKERS_DOWN


class KafkaEmitOptions(BaseModel):
    """The Kafka form of `$emit` (defaults as Atlas's)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    topic: Any
    key: Any = None
    key_format: Literal["binData", "string", "json", "int", "long"] | None = Field(
        default=None, alias="keyFormat"
    )
    headers: Any = None
    output_format: Literal["relaxedJson", "canonicalJson"] = Field(
        default="relaxedJson", alias="outputFormat"
    )
    date_format: Literal["default", "ISO8601"] = Field(default="default", alias="dateFormat")
    compression_type: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    acks: Literal["all", -1, 0, 1] = "all"
    tombstone_when: Any = Field(default=None, alias="tombstoneWhen")

    @classmethod
    def from_emit(cls, body: Mapping[str, Any]) -> KafkaEmitOptions:
        """From the `$emit` body: `topic` at the top, the rest under `config`."""
        config = {k: v for k, v in (body.get("config") or {}).items() if v is not None}
        return cls.model_validate({**config, "topic": body.get("topic")})

    def producer_config(self) -> dict[str, str]:
        """Producer settings from the options (the connection's settings come first)."""
        acks = "all" if self.acks in ("all", -1) else str(self.acks)
        return {
            "acks": acks,
            "compression.type": self.compression_type,
            # Idempotence removes broker-side duplicates from internal retries; it needs acks=all.
            "enable.idempotence": "true" if acks == "all" else "false",
            "linger.ms": "5",
            "message.timeout.ms": str(_MESSAGE_TIMEOUT_MS),
        }


def is_expression(value: Any) -> bool:
    """Whether an option value is computed per document (a `$` path or operator object)."""
    if isinstance(value, str):
        return value.startswith("$")
    if isinstance(value, Mapping):
        return any(str(k).startswith("$") for k in value) or any(map(is_expression, value.values()))
    if isinstance(value, list):
        return any(map(is_expression, value))
    return False


def kafka_names(options: Mapping[str, Any]) -> dict[str, Name]:
    """The per-document values `sinks.targets` must compute for this `$emit`, by the key they
    travel under in `Output.target` (`topic`, `key`, `headers`, `tombstoneWhen`)."""
    parsed = KafkaEmitOptions.from_emit(options)
    values = {
        "topic": (parsed.topic, ("topic",)),
        "key": (parsed.key, ("config", "key")),
        "headers": (parsed.headers, ("config", "headers")),
        "tombstoneWhen": (parsed.tombstone_when, ("config", "tombstoneWhen")),
    }
    return {
        name: Name(literal=None, expression=value, pointer=pointer)
        for name, (value, pointer) in values.items()
        if is_expression(value)
    }


class KafkaEmitWriter:
    """Produces each output document of a micro-batch to Kafka (see the module docstring)."""

    def __init__(
        self,
        options: Mapping[str, Any],
        connection: Any,
        processor: str,
        *,
        producer_factory: Callable[[dict[str, str]], Any] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.options = KafkaEmitOptions.from_emit(options)
        self._conf = {**self.options.producer_config(), **client_config(connection.config)}
        self._processor = processor
        self._producer_factory = producer_factory
        self._producer: Any = None
        self._clock = clock or (lambda: datetime.now(tz=UTC))
        self._topic = Name.of(self.options.topic, "topic")
        # Seconds to wait for acknowledgements: every message is either delivered or
        # reported by then (`message.timeout.ms`), plus slack.
        self._flush_s = int(self._conf.get("message.timeout.ms", _MESSAGE_TIMEOUT_MS)) / 1000 + 30

    def _client(self) -> Any:
        if self._producer is None:
            if self._producer_factory is not None:
                self._producer = self._producer_factory(self._conf)
            else:
                from confluent_kafka import Producer

                self._producer = Producer(self._conf, logger=client_logger())
        return self._producer

    def _value(self, name: str, constant: Any, target: Mapping[str, Any] | None) -> Any:
        if not is_expression(constant):
            return constant
        if target is None or name not in target:
            raise KF.EmitValueError(f"{name} expression was not evaluated for this document")
        return target[name]

    def _message(
        self, doc_json: str, target: Mapping[str, Any] | None, headers: list[tuple[str, bytes]]
    ) -> dict[str, Any]:
        """The `produce` arguments of one document; raises for per-document errors."""
        opts = self.options
        topic = resolve_name(self._topic, "topic", target)
        key_value = self._value("key", opts.key, target)
        key = None if opts.key_format is None else KF.encode_key(key_value, opts.key_format)
        user = KF.encode_headers(self._value("headers", opts.headers, target))
        dead = KF.tombstone(self._value("tombstoneWhen", opts.tombstone_when, target))
        value = (
            None
            if dead
            else KF.encode_value(
                doc_json, output_format=opts.output_format, date_format=opts.date_format
            )
        )
        return {"topic": topic, "key": key, "value": value, "headers": user + headers}

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Produce the batch's outputs and wait for every acknowledgement.

        Returns the DLQ records of the documents not written; raises when the cluster cannot
        be reached (the batch is then replayed: at-least-once).
        """
        if not batch.outputs:
            return []
        from confluent_kafka import KafkaException

        producer = self._client()
        keys = effective_keys(batch.outputs)
        failures: dict[int, str] = {}
        fatal: list[str] = []

        def delivered(index: int) -> Callable[[Any, Any], None]:
            def report(error: Any, _message: Any) -> None:
                if error is None:
                    return
                if error.code() in _RETRY_CODES or error.fatal():
                    fatal.append(str(error))
                else:
                    failures[index] = f"Kafka refused the message: {error.str()}"

            return report

        common = [(HEADER_PROCESSOR, self._processor.encode()), (HEADER_BATCH_ID, str(batch.batch_id).encode())]  # fmt: skip
        for index, output in enumerate(batch.outputs):
            pane = pane_headers(output.doc_json)
            headers = [*common, (HEADER_OUTPUT_ID, keys[index].encode()), *pane]
            try:
                message = self._message(output.doc_json, getattr(output, "target", None), headers)
            except (KF.EmitValueError, TargetError, ValueError) as error:
                failures[index] = str(error)
                continue
            self._produce(producer, message, delivered(index), failures, index, KafkaException)
        left = producer.flush(self._flush_s)
        if left or fatal:
            raise RuntimeError(
                f"Kafka $emit: {left} message(s) unacknowledged after {self._flush_s:g} s"
                + (f"; {fatal[0]}" if fatal else "")
            )
        return self._dlq(batch, keys, failures)

    @staticmethod
    def _produce(
        producer: Any,
        message: dict[str, Any],
        report: Callable[[Any, Any], None],
        failures: dict[int, str],
        index: int,
        kafka_exception: type[Exception],
    ) -> None:
        while True:
            try:
                producer.produce(**message, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)  # the local queue is full: let deliveries drain
            except kafka_exception as error:
                failures[index] = f"Kafka refused the message: {error}"
                break
        producer.poll(0)

    def _dlq(
        self, batch: BatchResult, keys: list[str], failures: Mapping[int, str]
    ) -> list[dict[str, Any]]:
        now = self._clock()
        return [
            sink_dlq_record(
                batch.outputs[index].doc_json,
                key=keys[index],
                reason=write_error_reason(OPERATOR, failures[index]),
                operator=OPERATOR,
                processor=self._processor,
                now=now,
            )
            for index in sorted(failures)
        ]

    def close(self) -> None:
        """Flush what is pending and drop the producer."""
        if self._producer is not None:
            self._producer.flush(self._flush_s)
            self._producer = None
