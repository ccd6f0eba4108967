"""The sinks that write per partition: staged File output published exactly once per batch id,
and the partition summary (`_engine.partitions`) without Spark."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline_stages._connectors.sinks.ids import effective_keys, failure_records
from pipeline_stages._connectors.sinks.partitioned import (
    STAGING,
    FilePartitionSink,
    WriterPartitionSink,
)
from pipeline_stages._connectors.sinks.plans import FileEmitPlan, Name
from pipeline_stages._engine.partitions import ARROW_ENVELOPE, PartitionWork, assemble
from pipeline_stages._engine.partitions import partition_summary as summary_of
from pipeline_stages._stream.batch import SINK_TARGET_META, BatchResult, SinkRequests
from pipeline_stages._stream.outputs import PartitionOutputs


def envelope(seq: int, doc: dict[str, Any], *, kind: str = "out", **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": kind, "part": 0, "seq": seq, "sub": 0, "doc": json.dumps(doc)}
    return {**row, **extra}


def table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=ARROW_ENVELOPE)


def file_sink(root: Path, path: Any = "out") -> FilePartitionSink:
    plan = FileEmitPlan(connection="files", path=Name.of(path, "path"))
    return FilePartitionSink(plan, root=str(root), processor="p", run_tag="r")


def write_batch(sink: FilePartitionSink, batch_id: int, parts: list[list[dict[str, Any]]]) -> None:
    """Write `parts` as the partitions of one batch, then publish (as the driver does)."""
    staged: list[tuple[str, str]] = []
    for index, rows in enumerate(parts):
        written = sink.write_partition(batch_id, index, 0, PartitionOutputs("p", table(rows)))
        staged.extend(written.staged)
    sink.publish(batch_id, staged)


def lines(directory: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for name in sorted(os.listdir(directory))
        if not name.startswith(".")
        for line in (directory / name).read_text().splitlines()
    ]


def test_a_replay_partitioned_differently_leaves_one_copy_of_each_line(tmp_path: Path) -> None:
    rows = [envelope(n, {"n": n}) for n in range(10)]
    sink = file_sink(tmp_path)
    write_batch(sink, 4, [rows[:3], rows[3:7], rows[7:]])
    first = sorted(os.listdir(tmp_path / "out"))
    assert first == [f"p-r-000000000004-{k:05d}.jsonl" for k in range(3)]
    write_batch(sink, 4, [rows[:5], rows[5:]])  # the replay: same rows, two partitions
    assert sorted(n["n"] for n in lines(tmp_path / "out")) == list(range(10))
    assert sorted(os.listdir(tmp_path / "out")) == [
        "p-r-000000000004-00000.jsonl",
        "p-r-000000000004-00001.jsonl",
    ]
    write_batch(sink, 4, [rows])  # and again in one partition: the batch's single file
    assert os.listdir(tmp_path / "out") == ["p-r-000000000004.jsonl"]
    assert [n["n"] for n in lines(tmp_path / "out")] == list(range(10))


def test_publishing_keeps_other_batches_and_clears_the_staging(tmp_path: Path) -> None:
    sink = file_sink(tmp_path)
    write_batch(sink, 1, [[envelope(0, {"n": 0})]])
    # A task attempt that failed left a staged file; its batch is then written by others.
    stale = tmp_path / "out" / STAGING / "p-r-000000000002" / "part-00000-0.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"n": "lost attempt"}\n')
    write_batch(sink, 2, [[envelope(1, {"n": 1})], [envelope(2, {"n": 2})]])
    assert sorted(os.listdir(tmp_path / "out")) == [
        "p-r-000000000001.jsonl",
        "p-r-000000000002-00000.jsonl",
        "p-r-000000000002-00001.jsonl",
    ]
    assert [n["n"] for n in lines(tmp_path / "out")] == [0, 1, 2]


def test_computed_paths_resolve_per_directory_and_bad_ones_go_to_the_dlq(tmp_path: Path) -> None:
    sink = file_sink(tmp_path, "$dir")

    def routed(seq: int, target: Any) -> dict[str, Any]:
        meta = json.dumps({SINK_TARGET_META: {"path": target}})
        return envelope(seq, {"n": seq}, meta=meta)

    rows = [routed(0, "a"), routed(1, "b"), routed(2, "../up"), routed(3, 7), routed(4, "a")]
    written = sink.write_partition(0, 0, 0, PartitionOutputs("p", table(rows)))
    sink.publish(0, written.staged)
    assert [n["n"] for n in lines(tmp_path / "a")] == [0, 4]
    assert [n["n"] for n in lines(tmp_path / "b")] == [1]
    assert [index for index, _ in written.failures] == [2, 3]
    assert {r["operatorName"] for _, r in written.failures} == {"EmitOperator"}
    assert [r["doc"] for _, r in written.failures] == [{"n": 2}, {"n": 3}]


class Refusing:
    """A driver-side writer that refuses odd documents (as a store does)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def write(self, batch: Any) -> list[dict[str, Any]]:
        from datetime import UTC, datetime

        from pipeline_stages._connectors.sinks.ids import effective_keys, failure_records

        self.seen.extend(o.doc_json for o in batch.outputs)
        keys = effective_keys(batch.outputs)
        odd = [(i, "odd") for i, o in enumerate(batch.outputs) if json.loads(o.doc_json)["n"] % 2]
        return failure_records(
            batch.outputs,
            keys,
            odd,
            operator="MergeOperator",
            processor="p",
            now=datetime.now(tz=UTC),
        )


def test_the_partition_summary_counts_samples_and_reports_failures() -> None:
    writer = Refusing()
    sink = WriterPartitionSink(make=lambda: writer, processor="p", on_executors=False)
    work = PartitionWork("p", sink, tail=3)
    rows = [envelope(n, {"n": n}) for n in range(8)]
    rows.insert(2, envelope(1, {"bad": 1}, kind="dlq", reason="why", operator="AddFieldsOperator"))
    rows.append({"kind": "stats", "doc": json.dumps({"bucket": 0, "openWindows": 1})})
    summary = [
        r for b in summary_of(work, 0, table(rows).to_batches(), 0, 0) for r in b.to_pylist()
    ]
    # Only the last outputs come back (with the DLQ and stats envelopes, the sink's DLQ
    # records and the counts).
    assert sorted(r["doc"] for r in summary if r["kind"] == "out") == [
        '{"n": 5}',
        '{"n": 6}',
        '{"n": 7}',
    ]
    batch, staged = assemble(work, 0, summary, {"count": 9, "bytes": 90})
    assert staged == []
    assert batch.totals is not None
    assert (batch.totals.produced, batch.totals.written) == (8, 4)
    assert batch.totals.written_bytes == sum(len(json.dumps({"n": n})) for n in (0, 2, 4, 6))
    assert [r["operatorName"] for r in batch.dlq] == ["AddFieldsOperator", *["MergeOperator"] * 4]
    assert [r["doc"]["n"] for r in batch.dlq[1:]] == [1, 3, 5, 7]
    # The last three messages: the sink's DLQ records come after the batch's envelopes.
    assert batch.order == [("dlq", 2), ("dlq", 3), ("dlq", 4)]
    assert batch.totals.first_message == 8 + 1 + 4 - 3
    assert batch.stats == [{"bucket": 0, "openWindows": 1}]
    assert len(writer.seen) == 8


class Requesting:
    """A writer that makes one request per document and reports them, as `$https` does: the
    odd ones are refused (DLQ'd), every request took 3 ms."""

    def __init__(self) -> None:
        self.requests: SinkRequests | None = None

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        refused = [o for o in batch.outputs if json.loads(o.doc_json)["n"] % 2]
        self.requests = SinkRequests(
            "HttpsOperator",
            len(batch.outputs),
            len(batch.outputs) - len(refused),
            tuple(3.0 for _ in batch.outputs),
        )
        return failure_records(
            batch.outputs,
            effective_keys(batch.outputs),
            [(i, "status 500") for i, o in enumerate(batch.outputs) if o in refused],
            operator="HttpsOperator",
            processor="p",
            now=datetime.now(tz=UTC),
        )


def test_the_sinks_request_counts_travel_in_the_summary_and_add_up_per_batch() -> None:
    sink = WriterPartitionSink(make=Requesting, processor="p", on_executors=False)
    work = PartitionWork("p", sink, tail=0)
    partitions = [[envelope(n, {"n": n}) for n in range(k, k + 3)] for k in (0, 3)]
    summary = [
        r
        for index, rows in enumerate(partitions)
        for b in summary_of(work, 7, table(rows).to_batches(), index, 0)
        for r in b.to_pylist()
    ]
    batch, _ = assemble(work, 7, summary, None)
    counts = batch.operators["HttpsOperator"]
    assert (counts["inputMessageCount"], counts["outputMessageCount"]) == (6, 3)
    assert counts["latencyBuckets"][2] == 6 and sum(counts["latencyBuckets"]) == 6
    assert len(batch.dlq) == 3
    # A writer that does not count requests (the other sinks) adds no operator entry.
    plain = PartitionWork("p", WriterPartitionSink(make=Refusing, processor="p"), tail=0)
    rows = table([envelope(0, {"n": 0})]).to_batches()
    other = [r for b in summary_of(plain, 0, rows, 0, 0) for r in b.to_pylist()]
    assert assemble(plain, 0, other, None)[0].operators == {}
