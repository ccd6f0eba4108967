"""The service and `sluice process` hand batches to sink writers (no Spark; SQLite stores)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages import parse_pipeline
from pipeline_stages._connectors.sinks.merge_writer import MergeWriter
from pipeline_stages._stream.batch import BatchResult, Output
from service.manager.stats import LiveStats
from service.manager.writers import DlqWriter, ProcessorWriter, SampleBuffer
from service.runtime.process import StdoutWriter, _LocalStore
from service.runtime.sink_resources import ClusterClients, StoreSinkResources, build_run_sink
from service.stores import ConnectionRecord, ConnectionType, DlqQuery, Stores, open_stores

SOURCE = {"$source": {"connectionName": "sample_stream_solar"}}


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_stores(data_dir=tmp_path)
    yield opened
    opened.close()


def merge_pipeline(**body: Any) -> list[Any]:
    into = {"connectionName": "local", "db": "app", "coll": "out"}
    return [SOURCE, {"$merge": {"into": into, **body}}]


def batch(batch_id: int, *docs: dict[str, Any]) -> BatchResult:
    result = BatchResult(batch_id=batch_id)
    result.outputs = [Output(json.dumps(d), f"{i + 1:024x}") for i, d in enumerate(docs)]
    result.order = [("out", i) for i in range(len(docs))]
    return result


def resources(stores: Stores, **connections: Any) -> StoreSinkResources:
    return StoreSinkResources(
        local=stores.documents, connections=connections, clients=ClusterClients()
    )


def test_a_pipeline_without_a_sink_has_no_writer(stores: Stores) -> None:
    parsed = parse_pipeline([SOURCE])
    assert build_run_sink(parsed, resources(stores), processor="p", run_tag="t") is None


def test_processor_writer_merges_and_stores_the_sinks_dlq_records(stores: Stores) -> None:
    parsed = parse_pipeline(merge_pipeline(on="k"))
    sink = build_run_sink(parsed, resources(stores), processor="p", run_tag="t")
    assert isinstance(sink, MergeWriter)
    stats = LiveStats()
    writer = ProcessorWriter(
        generation=1,
        stats=stats,
        sample=SampleBuffer(stores.documents, "abc", capacity=10),
        dlq=DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws"),
        sink=sink,
    )
    stores.documents.merge("app", "out", [{"_id": 1, "k": "a"}])
    one = batch(0, {"k": "b", "v": 1}, {"_id": 9, "k": "a", "v": 2})  # 2nd: immutable _id
    writer.write(one)
    assert [d["k"] for d in stores.documents.find("app", "out", sort=[("k", 1)])] == ["a", "b"]
    docs, total = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    assert total == 1 and docs[0]["operatorName"] == "MergeOperator"
    messages, _ = writer.sample.recent(10)
    assert [m.get("_dlqMessage", {}).get("operatorName") for m in messages] == [
        None,
        None,
        "MergeOperator",
    ]
    assert stats.snapshot()["dlqMessageCount"] == 1


def pane_result(total: int, index: int, *, retraction: bool = False) -> dict[str, Any]:
    pane: dict[str, Any] = {"index": index, "timing": "EARLY"}
    if retraction:
        pane["retraction"] = True
    return {"_id": "a", "total": total, "_stream_meta": {"window": {"pane": pane}}}


def test_merge_writes_no_retraction_but_the_sample_shows_them(stores: Stores) -> None:
    """Issue 25: a pane's retraction is not written to `$merge` (the re-emission under the
    same `_id` replaces the retracted result); `$emit` and the sample see every message."""
    sink = build_run_sink(
        parse_pipeline(merge_pipeline()), resources(stores), processor="p", run_tag="t"
    )
    writer = ProcessorWriter(
        generation=1,
        stats=LiveStats(),
        sample=SampleBuffer(stores.documents, "abc", capacity=10),
        dlq=DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws"),
        sink=sink,
    )
    writer.write(batch(0, pane_result(1, 0)))
    writer.write(batch(1, pane_result(1, 1, retraction=True), pane_result(6, 1)))
    written = stores.documents.find("app", "out")
    assert [(d["_id"], d["total"], d["_stream_meta"]["window"]["pane"]) for d in written] == [
        ("a", 6, {"index": 1, "timing": "EARLY"})
    ]
    messages, _ = writer.sample.recent(10)
    assert sorted(
        (m["total"], "retraction" in m["_stream_meta"]["window"]["pane"]) for m in messages
    ) == [
        (1, False),
        (1, True),
        (6, False),
    ]


def test_stdout_writer_writes_the_sink_and_prints_only_dlq_records(stores: Stores) -> None:
    parsed = parse_pipeline(
        merge_pipeline(into={"connectionName": "local", "db": "app", "coll": "$c"})
    )
    sink = build_run_sink(parsed, resources(stores), processor="p", run_tag="t")
    out = io.StringIO()
    writer = StdoutWriter(out, print_outputs=False, sink=sink)
    one = batch(0, {"v": 1})
    one.outputs[0] = Output(one.outputs[0].doc_json, one.outputs[0].key, {"coll": "x"})
    one.outputs.append(Output('{"v": 2}', "b" * 24, {"coll": None}))
    one.order.append(("out", 1))
    writer.write(one)
    printed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [p["_dlqMessage"]["doc"] for p in printed] == [{"v": 2}]
    assert [d["v"] for d in stores.documents.find("app", "x")] == [1]


def test_process_reads_registered_connections_only_when_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    monkeypatch.setenv("SLUICE_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("SLUICE_STORE_URL", raising=False)
    stores = open_stores(data_dir=tmp_path)
    stores.connections.create(
        ConnectionRecord(
            name="files",
            type=ConnectionType.FILE,
            config={"directory": "/srv/files"},
            created_at=datetime.now(tz=UTC),
        )
    )
    stores.close()
    local = _LocalStore()
    try:
        assert local.registered_connections([SOURCE]) == {}
        found = local.registered_connections(
            [{"$source": {"connectionName": "files", "path": "in"}}]
        )
        assert found["files"].type == "File"
        assert found["files"].config == {"directory": "/srv/files"}
    finally:
        local.close()
