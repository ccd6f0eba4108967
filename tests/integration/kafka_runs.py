"""Running pipelines on a Kafka `$source` in tests: compile, start, and poll progress.

Micro-batches are driven by polling the query's progress (never sleep-and-hope): a run waits
until a completed micro-batch's end offsets reach what was produced, or until its collector
holds what a test waits for. `processAllAvailable` is not used: it never returns with the
window operator's processing-time timeouts in the plan.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline_stages import parse_pipeline
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._engine.plan import compile_pipeline
from pipeline_stages._stream.batch import BatchResult
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from tests.streaming import wait_until

WAIT_S = 180.0  # bounded; the first batch of a run includes Python worker start-up
CONNECTION = "kafka"


@dataclass
class Collector:
    """Keeps every micro-batch; optionally forwards outputs to another writer (the sink)."""

    forward: Any = None
    batches: list[BatchResult] = field(default_factory=list)
    sink_dlq: list[dict[str, Any]] = field(default_factory=list)

    def write(self, batch: BatchResult) -> None:
        if self.forward is not None:
            self.sink_dlq += self.forward.write(batch)
        self.batches.append(batch)

    @property
    def outputs(self) -> list[dict[str, Any]]:
        return [json.loads(o.doc_json) for b in self.batches for o in b.outputs]

    @property
    def dlq(self) -> list[dict[str, Any]]:
        return [d for b in self.batches for d in b.dlq]


class KafkaRun:
    """One streaming query over a Kafka connection to `bootstrap`."""

    def __init__(
        self,
        spark: Any,
        pipeline: list[dict[str, Any]],
        bootstrap: str,
        checkpoint: Path,
        *,
        forward: Any = None,
        processor: str = "kafka-test",
    ) -> None:
        register_all(spark)
        ctx = CompileContext(
            spark=spark,
            processor_name=processor,
            problems=ProblemCollector(),
            has_dlq=True,
            connections={
                CONNECTION: ConnectionInfo(CONNECTION, "Kafka", {"bootstrapServers": bootstrap})
            },
        )
        self.compiled = compile_pipeline(parse_pipeline(pipeline), ctx)
        self.collector = Collector(forward=forward)
        self.sink = self.compiled.foreach_batch(
            self.collector, processor=processor, state_dir=f"{checkpoint}-window"
        )
        self.query = (
            self.compiled.envelopes.writeStream.foreachBatch(self.sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="0 seconds")
            .start()
        )

    def wait(self, done: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
        """Wait until `done()`, then for the batches done to be written (a batch window
        engine writes after Spark reports them); fail on a query error or after `timeout_s`."""
        wait_until(self.query, done, what, timeout_s)
        self.sink.flush()

    def progress(self) -> list[dict[str, Any]]:
        """Completed micro-batches' progress (Spark keeps the last 100)."""
        return [json.loads(p.json) if hasattr(p, "json") else p for p in self.query.recentProgress]

    def consumed(self, topic: str, ends: dict[int, int]) -> bool:
        """Whether a completed micro-batch ended at `ends` (`{partition: next offset}`)."""
        last = self.query.lastProgress
        if not last or not last.get("sources"):
            return False
        end = last["sources"][0].get("endOffset")
        end = json.loads(end) if isinstance(end, str) else end
        want = {str(p): o for p, o in ends.items()}
        return isinstance(end, dict) and end.get(topic) == want

    def wait_consumed(self, topic: str, ends: dict[int, int]) -> None:
        """Wait until every record up to `ends` went through a completed micro-batch."""
        self.wait(lambda: self.consumed(topic, ends), f"offsets {ends} of {topic}")

    def batches_after(self, count: int) -> None:
        """Wait until `count` more micro-batches completed (idle ones included)."""
        start = self._batch_id()
        self.wait(lambda: self._batch_id() >= start + count, f"{count} more micro-batches")

    def _batch_id(self) -> int:
        last = self.query.lastProgress
        return int(last["batchId"]) if last else -1

    def stop(self) -> None:
        self.query.stop()
        self.sink.close()


def drop_last_commit(checkpoint: Path) -> int:
    """Simulate a crash after a batch's offsets were logged but before it committed."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    crc = commits / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    return last


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
