"""Compile `$source` on a `Kafka` connection: choose a backend, read, ingest (§3.1, §4.6).

Backends, same options and the same `RAW_SCHEMA` rows whichever runs:

* **native**: Spark's own `kafka` format, when its jars (`spark-sql-kafka-0-10`) are on the
  classpath (docker-compose / production images). Its rows are converted to `RAW_SCHEMA`
  by `_native_to_raw` with the same helpers as the Python reader. **Untested here**: this
  machine has no Kafka jars (see /work/shared/reference/kafka-options.md §2); the path is
  kept small on purpose. It does not mirror offsets into `group_id`.
* **python**: `sources.kafka` (confluent-kafka), everywhere else.

`spark.sluice.kafka.backend` = `auto` (default) | `native` | `python` forces one.

Start position: a pinned `startOffsets` in the connection config (the service may pin it per
checkpoint, like HttpIngest's `startSeq`) wins; else `auto_offset_reset` earliest reads from
the beginning and latest is resolved to explicit offsets now, because Spark does not
checkpoint a Python source's initial offset (a restart before the first commit would ask for
"latest" again and skip what arrived in between).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipeline_stages._base import ProblemCode, join_path
from pipeline_stages._connectors.kafka_conf import client_config
from pipeline_stages._connectors.sources import kafka_offsets as K
from pipeline_stages._connectors.sources.arrow_records import checked, raw_batch
from pipeline_stages._connectors.sources.ingest import ingest_source
from pipeline_stages._connectors.sources.kafka import (
    DEFAULT_MAX_OFFSETS_PER_TRIGGER,
    FORMAT,
    KafkaStreamReader,
)
from pipeline_stages._connectors.sources.raw_source import RAW_SCHEMA, read_tasks
from pipeline_stages._stream.context import SourcePlan
from pipeline_stages._stream.frame import META, StreamFrame

BACKEND_CONF = "spark.sluice.kafka.backend"
_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
_log = logging.getLogger(__name__)


def compile_kafka_source(
    spec: Any,
    ctx: Any,
    connection: Any,
    body: str,
    *,
    observe: Callable[[DataFrame], DataFrame],
    operator: str,
) -> SourcePlan:
    """The `SourcePlan` of a Kafka `$source` (problems go to `ctx.problems`)."""
    topics = [spec.topic] if isinstance(spec.topic, str) else list(spec.topic or [])
    if not topics:
        ctx.problems.error(
            join_path(body, "topic"), "missing", "a $source on a Kafka connection needs a topic"
        )
    try:
        conf = client_config(connection.config)
    except ValueError as error:
        ctx.problems.error(join_path(body, "connectionName"), ProblemCode.INVALID_VALUE, str(error))
        conf = {"bootstrap.servers": "invalid:0"}
    # `$throttle` lives in Sluice's own reader (`sources.throttled`): Spark's cannot carry it.
    native = ctx.throttle is None and _use_native(ctx.spark)
    if not native and not _confluent_installed():
        ctx.problems.error(
            join_path(body, "connectionName"),
            ProblemCode.UNSUPPORTED_OPTION,
            "reading Kafka needs confluent-kafka (pip install 'sluice[kafka]') or Spark's "
            "Kafka connector jars on the classpath",
        )
        topics = []
    starting, partitions = _start(spec, connection, conf, topics)
    options = {
        "clientConfigSecret": json.dumps(conf),
        "topics": json.dumps(topics),
        "startingOffsets": starting,
        "maxOffsetsPerTrigger": str(_max_offsets(spec)),
        "keyFormat": spec.config.key_format,
        "keyFormatError": spec.config.key_format_error,
        "groupId": _group_id(spec) or "",
        "minPartitions": str(read_tasks(ctx)),
    }
    raw = _native_stream(ctx.spark, options, topics) if native else _python_stream(ctx, options)
    frame = ingest_source(observe(raw), spec, operator=operator, problems=ctx.problems, body=body)
    frame = fail_key_errors(frame, operator)
    return SourcePlan(
        frame=frame,
        finite_total=None,
        source_type=K.SOURCE_TYPE,
        # One topic: parts are 0..n-1, so a silent partition holds the watermark back (§4.6).
        # Several topics: parts are sparse; only the partitions that produced count.
        partitions=partitions if len(topics) == 1 else None,
    )


def fail_key_errors(frame: StreamFrame, operator: str) -> StreamFrame:
    """Send messages whose key did not decode (`keyFormatError: "dlq"`) to the DLQ."""
    error = F.try_variant_get(F.col(META), "$.source.keyError", "string")
    reason = F.concat(F.lit("Failed to process input document with error: "), error)
    failed = frame.fail(error.isNotNull(), reason, operator)
    if frame.unstamped is None:
        return failed
    # The key is the message's, not the document's: the unstamped form fails alike.
    unstamped = StreamFrame(frame.unstamped.df).fail(error.isNotNull(), reason, operator)
    return StreamFrame(failed.df, unstamped=replace(frame.unstamped, df=unstamped.df))


def _max_offsets(spec: Any) -> int:
    given = getattr(spec.config, "max_offsets_per_trigger", None)
    return int(given) if given else DEFAULT_MAX_OFFSETS_PER_TRIGGER


def _group_id(spec: Any) -> str | None:
    """The group progress is mirrored into: only an explicit `group_id`, and not when
    `enable_auto_commit` is false (then Atlas commits at checkpoints; Sluice's checkpoint
    is Spark's, so there is nothing else to commit to)."""
    if spec.config.enable_auto_commit is False:
        return None
    return spec.config.group_id


def _start(
    spec: Any, connection: Any, conf: dict[str, str], topics: list[str]
) -> tuple[str, int | None]:
    """`startingOffsets` for the reader and the partition count of a single topic."""
    pinned = connection.config.get("startOffsets")
    earliest = spec.config.auto_offset_reset in K.EARLIEST
    if not topics or not _confluent_installed():
        return ("earliest" if earliest else "latest"), None
    probe = KafkaStreamReader(
        {"clientconfigsecret": json.dumps(conf), "topics": json.dumps(topics)}
    )
    try:
        latest = probe.watermarks("latest")
    except Exception as error:  # noqa: BLE001 - an unreachable broker must not stop compilation
        _log.warning("Kafka metadata unavailable at compile time (%s); starting lazily", error)
        return ("earliest" if earliest else "latest"), None
    finally:
        probe.stop()
    count = len(latest.get(topics[0], {})) or None
    if pinned:
        return (pinned if isinstance(pinned, str) else json.dumps(pinned)), count
    if earliest:
        return "earliest", count
    return json.dumps(latest), count


def _confluent_installed() -> bool:
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return False
    return True


def _use_native(spark: Any) -> bool:
    """Whether Spark's JVM `kafka` format runs this source (see the module docstring)."""
    choice = (spark.conf.get(BACKEND_CONF, "auto") or "auto").lower()
    if choice in ("native", "python"):
        return choice == "native"
    try:
        jvm = spark._jvm  # absent on Spark Connect: no way to check, use Python
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(_PROVIDER, False, loader)
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return False
    return True


def _python_stream(ctx: Any, options: dict[str, str]) -> DataFrame:
    return ctx.read_stream().format(FORMAT).options(**options).load()


def _native_stream(spark: Any, options: dict[str, str], topics: list[str]) -> DataFrame:
    """Spark's `kafka` format with the same options, converted to `RAW_SCHEMA` (untested)."""
    conf = json.loads(options["clientConfigSecret"])
    reader = spark.readStream.format("kafka").options(
        **{f"kafka.{k}": v for k, v in conf.items()},
        subscribe=",".join(topics),
        startingOffsets=options["startingOffsets"],
        maxOffsetsPerTrigger=options["maxOffsetsPerTrigger"],
        minPartitions=options["minPartitions"],
        includeHeaders="true",
        failOnDataLoss="false",
    )
    convert = _native_to_raw(topics, options["keyFormat"], options["keyFormatError"])
    return reader.load().mapInArrow(convert, RAW_SCHEMA)


def _native_to_raw(topics: list[str], key_format: str, key_format_error: str) -> Any:
    """An Arrow function from Spark's Kafka rows to `RAW_SCHEMA` rows (same helpers as the
    Python reader, so `part`, `meta` and number literals come out identical)."""
    index = {t: i for i, t in enumerate(topics)}

    def convert(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            cols = batch.to_pydict()
            n = batch.num_rows
            raw, error = checked(batch.column("value").cast(pa.binary()))
            yield raw_batch(
                part=[
                    K.part_id(index.get(t, 0), p)
                    for t, p in zip(cols["topic"], cols["partition"], strict=True)
                ],
                seq=cols["offset"],
                raw=raw,
                source_ts_ms=[int(ts.timestamp() * 1000) for ts in cols["timestamp"]],
                meta=[
                    K.source_meta(
                        topic=cols["topic"][i],
                        partition=cols["partition"][i],
                        offset=cols["offset"][i],
                        key=cols["key"][i],
                        headers=[(h["key"], h["value"]) for h in cols["headers"][i] or []],
                        key_format=key_format,
                        key_format_error=key_format_error,
                    )
                    for i in range(n)
                ],
                error=error,
            )

    return convert
