"""The HttpIngest `$source` on Spark: a spooled backlog is read in bounded micro-batches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages import source as source_stage
from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sources.http_ingest import encode_record
from pipeline_stages._connectors.sources.register import register_all
from pipeline_stages._stream.context import CompileContext, ConnectionInfo
from service.stores import Spool
from tests.streaming import wait_until

pytestmark = pytest.mark.spark


def test_max_offsets_per_trigger_bounds_each_batch_of_a_backlog(spark: Any, tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.append("orders", [encode_record(b'{"n": %d}' % n, 1_000 + n) for n in range(7)])
    source = {
        "$source": {
            "connectionName": "orders",
            "config": {"auto_offset_reset": "earliest", "maxOffsetsPerTrigger": 3},
        }
    }
    register_all(spark)
    ctx = CompileContext(
        spark=spark,
        processor_name="bounded",
        problems=ProblemCollector(),
        connections={"orders": ConnectionInfo(name="orders", type="HttpIngest", config={})},
        data_dir=str(tmp_path),
    )
    stage = parse_pipeline([source]).stages[0]
    frame = source_stage.compile(stage.spec, ctx, stage.path).frame
    ctx.problems.raise_if_any()
    sizes: dict[int, int] = {}

    def collect(batch: Any, batch_id: int) -> None:
        sizes[batch_id] = batch.count()

    query = (
        frame.df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        wait_until(query, lambda: sum(sizes.values()) >= 7, "the 7 spooled records", 120)
    finally:
        query.stop()
    assert [sizes[i] for i in sorted(sizes) if sizes[i]] == [3, 3, 1]
