"""The Python backend of the Kafka `$source`: a streaming Python Data Source on confluent-kafka.

Used when Spark's own `kafka` format is not on the classpath (`sources.kafka_plan` chooses).
Rows have the common `RAW_SCHEMA`: `part` = a stable integer per (topic, partition) (the
partition number for one topic), `seq` = the Kafka offset, `raw` = the message value as
text, `source_ts_ms` = the message timestamp, `meta` = `_stream_meta.source` as JSON.

Guarantees and choices:

* Offsets live in Spark's checkpoint (`{"topic": {"partition": next}}`, see
  `kafka_offsets`); a replayed micro-batch reads the same `[start, end)` per partition.
* One input partition per Kafka partition with new records. Workers read with `assign` and
  an explicit start offset, never a group subscription: no rebalances, no group joins.
* `maxOffsetsPerTrigger` bounds a micro-batch (back pressure after a pause); the bound is
  shared among partitions by backlog.
* The consumer group (`groupId`), when given, only mirrors progress after a batch committed,
  for lag tooling; it is never read back. Commit failures are ignored (best effort).
* Records deleted by retention before they were read are skipped (the reader resets to the
  earliest retained offset), like Spark's `failOnDataLoss=false`.

Options (Spark lower-cases the keys): `clientConfigSecret` (JSON librdkafka settings; the
name matches Spark's `spark.redaction.regex`, so plans and logs never show credentials),
`topics` (JSON array), `startingOffsets` (`earliest`, `latest` or offsets JSON),
`maxOffsetsPerTrigger`, `keyFormat`, `keyFormatError`, `groupId`, `pollTimeoutMs`,
`minPartitions`, `minRowsPerTask` (the smallest range worth a task of its own).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from pipeline_stages._connectors.kafka_log import client_logger
from pipeline_stages._connectors.sources import kafka_offsets as K
from pipeline_stages._connectors.sources.arrow_records import checked, raw_batch
from pipeline_stages._connectors.sources.raw_source import RawRecordSource

FORMAT = "sluice_kafka"

#: Records per micro-batch unless the source sets `maxOffsetsPerTrigger`.
DEFAULT_MAX_OFFSETS_PER_TRIGGER = 10_000

#: How long a worker waits for a record it knows exists before failing the task.
DEFAULT_POLL_TIMEOUT_MS = 60_000

_METADATA_TIMEOUT_S = 10.0
_READER_GROUP = "sluice-reader"  # required by librdkafka; assign() never joins it
_RESEEK_AFTER_S = 5.0
_log = logging.getLogger(__name__)


class KafkaUnreachableError(RuntimeError):
    """The brokers did not answer a metadata request: the message says what to check."""


def unreachable_message(servers: str, error: Exception, timeout_s: float) -> str:
    """What a user reads when the brokers do not answer (no secrets: servers only)."""
    cause = error.args[0] if error.args else error
    text = cause.str() if hasattr(cause, "str") else str(cause)
    return (
        f"the Kafka brokers at {servers} did not answer within {timeout_s:g} s ({text}): "
        "check the connection's bootstrapServers and security settings and that the brokers "
        "are running (`sluice connections test NAME` checks a connection)"
    )


#: Fewer records than this per task are not worth cutting a partition's range for.
MIN_ROWS_PER_TASK = 4_096


class KafkaRange(InputPartition):
    """The records `[first, end)` of one Kafka partition."""

    def __init__(self, topic: str, partition: int, part: int, first: int, end: int) -> None:
        self.topic = topic
        self.partition = partition
        self.part = part
        self.first = first
        self.end = end


class KafkaStreamReader(DataSourceStreamReader):
    """Driver side: offsets and ranges. Worker side: `read` of one range."""

    def __init__(self, options: dict[str, str]) -> None:
        self.conf: dict[str, str] = json.loads(options["clientconfigsecret"])
        self.topics: list[str] = json.loads(options["topics"])
        self.starting = options.get("startingoffsets", "latest")
        self.max_per_trigger = int(
            options.get("maxoffsetspertrigger", DEFAULT_MAX_OFFSETS_PER_TRIGGER)
        )
        self.key_format = options.get("keyformat", "binData")
        self.key_format_error = options.get("keyformaterror", "dlq")
        self.group_id = options.get("groupid") or None
        self.poll_timeout_s = int(options.get("polltimeoutms", DEFAULT_POLL_TIMEOUT_MS)) / 1000
        self.min_partitions = max(1, int(options.get("minpartitions", "1")))
        self.min_rows_per_task = max(1, int(options.get("minrowspertask", MIN_ROWS_PER_TASK)))
        self._meta: Any = None  # driver-side consumer for metadata, never pickled

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_meta"] = None
        return state

    # --- driver side -----------------------------------------------------------------

    def _metadata_consumer(self) -> Any:
        if self._meta is None:
            from confluent_kafka import Consumer

            self._meta = Consumer(
                {**self.conf, "group.id": _READER_GROUP, "enable.auto.commit": "false"},
                logger=client_logger(),
            )
        return self._meta

    def watermarks(self, which: str) -> K.Offsets:
        """Low (`earliest`) or high (`latest`) watermark of every partition of the topics.

        A topic that does not exist yet has no partitions: the stream waits for it.

        Raises:
            KafkaUnreachableError: the brokers did not answer (the query fails with what to
                check, instead of librdkafka's bare `KafkaError{code=_TRANSPORT,...}`).
        """
        from confluent_kafka import KafkaException, TopicPartition

        consumer = self._metadata_consumer()
        out: K.Offsets = {}
        try:
            for topic in self.topics:
                listed = consumer.list_topics(topic, timeout=_METADATA_TIMEOUT_S)
                described = listed.topics.get(topic)
                if described is None or described.error is not None:
                    continue
                out[topic] = {}
                for partition in sorted(described.partitions):
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=_METADATA_TIMEOUT_S, cached=False
                    )
                    out[topic][str(partition)] = low if which == "earliest" else high
        except KafkaException as error:
            servers = self.conf.get("bootstrap.servers", "?")
            raise KafkaUnreachableError(
                unreachable_message(servers, error, _METADATA_TIMEOUT_S)
            ) from None
        return out

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts: `earliest`, `latest` or explicit offsets.

        Spark does not checkpoint this value; the compile step therefore resolves `latest`
        to explicit offsets once (see `kafka_plan`), so a restart before the first commit
        does not skip records.
        """
        if self.starting in ("earliest", "latest"):
            return self.watermarks(self.starting)
        return K.normalise(json.loads(self.starting))

    def getDefaultReadLimit(self) -> ReadLimit:
        """At most `maxOffsetsPerTrigger` records per micro-batch."""
        return ReadMaxRows(self.max_per_trigger)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next batch's end: every partition's high watermark, within the read limit."""
        begin = K.normalise(start)
        latest = self.watermarks("latest")
        if any(p not in begin.get(t, {}) for t, parts in latest.items() for p in parts):
            begin = K.fill_missing(begin, latest, self.watermarks("earliest"))
        max_rows = None
        if not isinstance(limit, ReadAllAvailable) and isinstance(limit, ReadMaxRows):
            max_rows = limit.max_rows
        return K.bounded_end(begin, latest, max_rows)

    def reportLatestOffset(self) -> dict[str, Any]:
        """The high watermarks: lets progress reports show the backlog."""
        return self.watermarks("latest")

    def records_between(self, start: dict[str, Any], end: dict[str, Any]) -> int:
        """Offsets between two offsets, every partition (`$throttle`; a compacted topic's
        gaps count too, so the throttle errs on the slow side)."""
        begin, finish = K.normalise(start), K.normalise(end)
        return sum(
            max(0, offset - begin.get(topic, {}).get(partition, offset))
            for topic, parts in finish.items()
            for partition, offset in parts.items()
        )

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        """One input partition per Kafka partition with records in `[start, end)`, a large
        backlog cut into about `minPartitions` (`kafka_offsets.split_ranges`)."""
        index = {t: i for i, t in enumerate(self.topics)}
        found = K.ranges(K.normalise(start), K.normalise(end), self.topics)
        return [
            KafkaRange(topic, partition, K.part_id(index.get(topic, 0), partition), first, last)
            for topic, partition, first, last in K.split_ranges(
                found, tasks=self.min_partitions, min_rows=self.min_rows_per_task
            )
        ]

    def commit(self, end: dict[str, Any]) -> None:
        """Mirror progress into the consumer group (lag tooling only; Spark's checkpoint is
        what a restart reads). Best effort: a failed commit is logged and ignored."""
        if not self.group_id:
            return
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        offsets = [
            TopicPartition(t, int(p), o)
            for t, parts in K.normalise(end).items()
            for p, o in parts.items()
        ]
        if not offsets:
            return
        consumer = Consumer(
            {**self.conf, "group.id": self.group_id, "enable.auto.commit": "false"},
            logger=client_logger(),
        )
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as error:
            _log.warning("committing offsets to group %s failed: %s", self.group_id, error)
        finally:
            consumer.close()

    def stop(self) -> None:
        """Close the metadata consumer."""
        if self._meta is not None:
            self._meta.close()
            self._meta = None

    # --- worker side -----------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Yield the range's records as Arrow batches in `RAW_SCHEMA`."""
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        if not isinstance(partition, KafkaRange):
            raise TypeError(f"unexpected partition {partition!r}")
        consumer = Consumer(
            {
                **self.conf,
                "group.id": _READER_GROUP,
                "enable.auto.commit": "false",
                "enable.partition.eof": "true",
                # Never jump silently: an out-of-range fetch is reported and handled below.
                "auto.offset.reset": "error",
            },
            logger=client_logger(),
        )
        nxt = partition.first
        consumer.assign([TopicPartition(partition.topic, partition.partition, nxt)])
        deadline = time.monotonic() + self.poll_timeout_s
        stalled_since = time.monotonic()
        try:
            while nxt < partition.end:
                rows: list[list[Any]] = [[], [], [], [], [], []]
                for message in consumer.consume(min(10_000, partition.end - nxt), 1.0):
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            nxt = self._recover(consumer, partition, nxt, error)
                        continue
                    offset = message.offset()
                    if offset is None:  # a consumed message without an error has one
                        raise RuntimeError(
                            f"{partition.topic}/{partition.partition}: a message without an offset"
                        )
                    if offset >= partition.end:
                        nxt = partition.end
                        break
                    self._append(rows, partition, message)
                    nxt = offset + 1
                if rows[0]:
                    deadline = time.monotonic() + self.poll_timeout_s
                    stalled_since = time.monotonic()
                    yield rows_batch(rows)
                    continue
                # Compaction gaps and transaction markers: trust the consumer's position.
                spot = TopicPartition(partition.topic, partition.partition)
                position = consumer.position([spot])[0].offset
                if position >= partition.end:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{partition.topic}/{partition.partition}: no record at offset {nxt} "
                        f"(range ends at {partition.end}) within {self.poll_timeout_s:g} s"
                    )
                if time.monotonic() - stalled_since > _RESEEK_AFTER_S:
                    # A fetch that never answers (seen on test brokers): ask again.
                    consumer.assign([TopicPartition(partition.topic, partition.partition, nxt)])
                    stalled_since = time.monotonic()
        finally:
            consumer.close()

    def _recover(self, consumer: Any, partition: KafkaRange, nxt: int, error: Any) -> int:
        """Handle a fetch error at `nxt`; returns where to read from next.

        Out of range below the log start means retention deleted the records: skip to the
        log start (logged; Spark's `failOnDataLoss=false`). Out of range inside the log is a
        broker hiccup: seek again. Other retriable errors are waited out (bounded by the
        caller's deadline); anything else fails the task, and Spark retries it.
        """
        from confluent_kafka import KafkaError, TopicPartition

        code = error.code()
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            spot = TopicPartition(partition.topic, partition.partition)
            low, _high = consumer.get_watermark_offsets(
                spot, timeout=_METADATA_TIMEOUT_S, cached=False
            )
            if nxt < low:
                _log.warning(
                    "%s/%s: offsets %s..%s were deleted before they were read; skipping",
                    partition.topic,
                    partition.partition,
                    nxt,
                    low - 1,
                )
                nxt = low
            consumer.assign([TopicPartition(partition.topic, partition.partition, nxt)])
            return nxt
        if error.retriable():
            return nxt
        raise RuntimeError(f"Kafka error reading {partition.topic}/{partition.partition}: {error}")

    def _append(self, rows: list[list[Any]], partition: KafkaRange, message: Any) -> None:
        from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

        kind, ts_ms = message.timestamp()
        value = message.value()
        rows[0].append(partition.part)
        rows[1].append(message.offset())
        # The value as received (`rows_batch` checks them all at once). A null value
        # (tombstone) stays null: not a JSON object, so it goes to the DLQ.
        rows[2].append(value)
        rows[3].append(0 if kind == TIMESTAMP_NOT_AVAILABLE else ts_ms)
        rows[4].append(
            K.source_meta(
                topic=partition.topic,
                partition=partition.partition,
                offset=message.offset(),
                key=message.key(),
                headers=message.headers(),
                key_format=self.key_format,
                key_format_error=self.key_format_error,
            )
        )
        rows[5].append(None)


def rows_batch(rows: list[list[Any]]) -> Any:
    """The `RAW_ARROW` batch of the columns `_append` collected (values checked in bulk)."""
    raw, error = checked(pa.array(rows[2], pa.binary()))
    return raw_batch(
        part=rows[0], seq=rows[1], raw=raw, source_ts_ms=rows[3], meta=rows[4], error=error
    )


class KafkaDataSource(RawRecordSource):
    """Format `sluice_kafka`; see the module docstring for the options."""

    format_name = FORMAT
    stream_reader = KafkaStreamReader
