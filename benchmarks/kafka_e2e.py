"""Kafka end to end: Kafka `$source` → tumbling `$group` → sink, vs the `documents` source.

Both pipelines are the same (`timeField` from the document, 1 s tumbling windows, `$count`,
`$sum`, `$avg` per device) and run on one local SparkSession against a noida-db broker started
here (the test fixture's launcher). The pipelines end in `$merge` into `local` (the embedded
SQLite store of a temporary data directory, one collection per run), written per micro-batch
by the same writer the service uses (`service.runtime.sink_resources.build_run_sink`), so batch
durations and latencies include the sink.

* **throughput**: all records are there before the query starts and are read in micro-batches
  of `--batch`; rows/s = rows / summed batch durations, first micro-batch excluded (Python
  worker start-up). Same measure for the `documents` source, fed from the same process
  (no broker, no network): the ratio shows what the Kafka source costs.
* **latency** (Kafka only): records are produced at `--rate`/s with the produce time as the
  message timestamp (event time = wall clock); latency = when a window's result had been
  merged into `local` − the window's end (≈ produce time of the record that closed it).

    python benchmarks/kafka_e2e.py [--rows 30000] [--batch 6000] [--runs 3] [--rate 200]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline_stages import parse_pipeline  # noqa: E402
from pipeline_stages._base import ProblemCollector  # noqa: E402
from pipeline_stages._connectors.sinks.dispatch import SinkWriter, apply_sink  # noqa: E402
from pipeline_stages._connectors.sources.register import register_all  # noqa: E402
from pipeline_stages._engine.plan import compile_pipeline  # noqa: E402
from pipeline_stages._stream.batch import BatchResult  # noqa: E402
from pipeline_stages._stream.context import CompileContext, ConnectionInfo  # noqa: E402
from service.runtime.sink_resources import ClusterClients, StoreSinkResources, build_run_sink  # noqa: E402
from service.stores import Stores, open_stores  # noqa: E402
from tests.kafka_broker import KafkaBroker, start, stop  # noqa: E402

DEVICES = 50
WINDOW = {
    "$tumblingWindow": {
        "interval": {"size": 1, "unit": "second"},
        "allowedLateness": 0,
        "pipeline": [
            {
                "$group": {
                    "_id": "$device",
                    "n": {"$count": {}},
                    "watts": {"$sum": "$w"},
                    "avg": {"$avg": "$w"},
                }
            }  # fmt: skip
        ],
    }
}
TIME_FIELD = {"$toDate": "$ts"}
#: After the window: the group key moves out of `_id`, so each window result gets the
#: deterministic id of its window and key (one document per window and device, as in the
#: service) instead of overwriting the previous window's document of its device.
TO_MERGE = [{"$set": {"device": "$_id"}}, {"$unset": "_id"}]


class Sink:
    """Merges each micro-batch into `local`, then notes when its window results got there."""

    def __init__(self, merge: SinkWriter | None) -> None:
        self.merge = merge
        self.results: list[tuple[float, dict[str, Any]]] = []

    def write(self, batch: BatchResult) -> None:
        apply_sink(self.merge, batch)  # as the service's writer does, before anything else
        now = time.time()
        self.results += [(now, json.loads(o.doc_json)) for o in batch.outputs]


class Local:
    """The embedded store of a temporary data directory: one `$merge` target per query."""

    def __init__(self) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="sluice-bench-data-")
        self.stores: Stores = open_stores(data_dir=self.data_dir)
        self.clients = ClusterClients()
        self.queries = 0

    def pipeline(self, source: dict[str, Any]) -> tuple[list[Any], str]:
        """`$source` → window → `$merge` into a fresh collection (and that collection's name)."""
        self.queries += 1
        coll = f"windows_{self.queries}"
        merge = {"$merge": {"into": {"connectionName": "local", "db": "bench", "coll": coll}}}
        return [{"$source": source}, WINDOW, *TO_MERGE, merge], coll

    def sink(self, pipeline: list[Any]) -> Sink:
        """The `$merge` writer of a pipeline, built as the service builds it."""
        resources = StoreSinkResources(
            local=self.stores.documents, connections={}, clients=self.clients
        )
        tag = f"run{self.queries}"
        return Sink(
            build_run_sink(parse_pipeline(pipeline), resources, processor="bench", run_tag=tag)
        )

    def count(self, coll: str) -> int:
        return self.stores.documents.count("bench", coll)

    def close(self) -> None:
        self.clients.close()
        self.stores.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


def docs(count: int, base_ms: int, step_ms: int = 1) -> list[str]:
    return [
        json.dumps({"device": f"d{i % DEVICES}", "w": (i * 7) % 500, "ts": base_ms + i * step_ms})
        for i in range(count)
    ]


def start_query(spark: Any, pipeline: list[Any], bootstrap: str | None, sink: Sink) -> Any:
    connections = {"kafka": ConnectionInfo("kafka", "Kafka", {"bootstrapServers": bootstrap})}
    ctx = CompileContext(
        spark=spark,
        processor_name="bench",
        problems=ProblemCollector(),
        has_dlq=True,
        connections=connections if bootstrap else {},
    )
    compiled = compile_pipeline(parse_pipeline(pipeline), ctx)
    return (
        compiled.envelopes.writeStream.foreachBatch(
            compiled.foreach_batch(sink, processor="bench", state_dir=None)
        )
        .option("checkpointLocation", tempfile.mkdtemp(prefix="sluice-bench-"))
        .trigger(processingTime="0 seconds")
        .start()
    )


def wait_rows(query: Any, total: int, timeout_s: float = 600) -> list[dict[str, Any]]:
    """Poll progress until `total` source rows went through completed micro-batches."""
    deadline = time.monotonic() + timeout_s
    while True:
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        if sum(p["numInputRows"] for p in progress) >= total:
            return progress
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {sum(p['numInputRows'] for p in progress)} of {total} rows")
        time.sleep(0.05)


def rows_per_second(progress: list[dict[str, Any]]) -> float:
    steady = progress[1:] or progress
    return sum(p["numInputRows"] for p in steady) / (sum(p["batchDuration"] for p in steady) / 1000)


def throughput(
    spark: Any, broker: KafkaBroker | None, rows: int, batch: int, local: Local
) -> float:
    base = (int(time.time()) // 60 - 60) * 60_000
    texts = docs(rows, base)
    if broker is not None:
        topic = broker.create_topic(3, prefix="bench")
        for part in range(3):
            broker.produce(topic, texts[part::3], partition=part)
        source = {"connectionName": "kafka", "topic": topic, "timeField": TIME_FIELD,
                  "config": {"auto_offset_reset": "earliest", "maxOffsetsPerTrigger": batch}}  # fmt: skip
    else:
        source = {"documents": [json.loads(t) for t in texts], "timeField": TIME_FIELD,
                  "config": {"batchSize": batch}}  # fmt: skip
    pipeline, coll = local.pipeline(source)
    sink = local.sink(pipeline)
    query = start_query(spark, pipeline, broker.bootstrap if broker else None, sink)
    try:
        rate = rows_per_second(wait_rows(query, rows))
    finally:
        query.stop()
    merged = local.count(coll)
    if merged != len(sink.results):  # every window result was merged, each once
        raise RuntimeError(f"{merged} documents in local.bench.{coll}, {len(sink.results)} results")
    return rate


def latency(
    spark: Any, broker: KafkaBroker, rate: int, seconds: float, local: Local
) -> list[float]:
    """Window result merged − window end, in ms, for every window closed while producing."""
    from confluent_kafka import Producer

    topic = broker.create_topic(1, prefix="lat")
    source = {"connectionName": "kafka", "topic": topic, "timeField": TIME_FIELD}
    pipeline, _ = local.pipeline(source)
    sink = local.sink(pipeline)
    query = start_query(spark, pipeline, broker.bootstrap, sink)
    try:
        wait_first_batch(query)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        stop_at = time.time() + seconds
        sent = 0
        while time.time() < stop_at:
            now_ms = int(time.time() * 1000)
            doc = {"device": f"d{sent % DEVICES}", "w": sent % 500, "ts": now_ms}
            producer.produce(topic, json.dumps(doc).encode(), timestamp=now_ms)
            producer.poll(0)
            sent += 1
            time.sleep(max(0.0, (sent / rate) - (time.time() - (stop_at - seconds))))
        producer.flush(30)
        wait_rows(query, sent)
    finally:
        query.stop()
    ends = {}
    for arrived, doc in sink.results:
        end = doc["_stream_meta"]["window"]["end"]["$date"]
        ends.setdefault(end, arrived)  # first result of the window
    from datetime import datetime

    return [
        (arrived - datetime.fromisoformat(end.replace("Z", "+00:00")).timestamp()) * 1000
        for end, arrived in ends.items()
    ]


def wait_first_batch(query: Any) -> None:
    """Let the query start up (Python workers) before latency is measured."""
    deadline = time.monotonic() + 300
    while query.lastProgress is None and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=30_000)
    parser.add_argument("--batch", type=int, default=6_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rate", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()

    from pipeline_stages._engine.session import build_session

    spark = build_session(master="local[2]", app_name="sluice-bench-kafka", conf={"spark.sql.shuffle.partitions": "1"})  # fmt: skip
    register_all(spark)
    broker = start()
    local = Local()
    try:
        print(f"sink: $merge into local (SQLite in {local.data_dir}), one collection per run")
        kafka = [throughput(spark, broker, args.rows, args.batch, local) for _ in range(args.runs)]
        print(
            "kafka     rows/s:",
            [round(x) for x in kafka],
            "median",
            round(statistics.median(kafka)),
        )
        base = [throughput(spark, None, args.rows, args.batch, local) for _ in range(args.runs)]
        print(
            "documents rows/s:", [round(x) for x in base], "median", round(statistics.median(base))
        )
        print(f"kafka / documents: {statistics.median(kafka) / statistics.median(base):.2f}")
        lat: list[float] = []
        for _ in range(args.runs):
            run = latency(spark, broker, args.rate, args.seconds, local)
            lat.append(statistics.median(run))
            print(f"latency run: {len(run)} windows, median {statistics.median(run):.0f} ms, max {max(run):.0f} ms")  # fmt: skip
        print(f"kafka end-to-end latency (window end -> merged into local), median of runs: {statistics.median(lat):.0f} ms")  # fmt: skip
    finally:
        local.close()
        stop(broker)
        spark.stop()


if __name__ == "__main__":
    main()
