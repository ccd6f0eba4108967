"""Batch writing (idempotent per batch id), the sample buffer, stats and metrics (no Spark)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from pipeline_stages._enrichment.operator_stats import request_counts
from pipeline_stages._stream.batch import BatchResult, Output, OutputTotals, SinkRequests
from service.api.metrics import ProcessorSample, render
from service.manager.runs import summarize_error
from service.manager.stats import LiveStats
from service.manager.writers import (
    KIND_DLQ,
    KIND_OUT,
    DlqWriter,
    ProcessorWriter,
    SampleBuffer,
    parse_cursor,
)
from service.stores import DlqQuery, Stores, open_stores


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_stores(data_dir=tmp_path)
    yield opened
    opened.close()


def dlq_record(n: int, operator: str = "AddFieldsOperator") -> dict[str, Any]:
    return {
        "_id": {"$oid": f"{n:024x}"},
        "_stream_meta": {"source": {"type": "httpIngest", "seq": n}},
        "errInfo": {"reason": "boom"},
        "operatorName": operator,
        "doc": {"n": n, "at": {"$date": "2024-01-01T00:00:00.000Z"}},
        "processorName": "p",
        "dlqTime": {"$date": "2024-01-01T00:00:05.000Z"},
    }


def batch(batch_id: int) -> BatchResult:
    result = BatchResult(batch_id=batch_id)
    result.outputs = [Output('{"n":1,"x":1.0}', "k1"), Output('{"n":2}', "k2")]
    result.dlq = [dlq_record(batch_id)]
    result.order = [(KIND_OUT, 0), (KIND_DLQ, 0), (KIND_OUT, 1)]
    result.stats = [
        {"bucket": 0, "stateSize": 100, "watermark": {"$date": "2024-01-01T00:00:09.999Z"}}
    ]
    return result


def writer_for(stores: Stores, stats: LiveStats, *, capacity: int = 100) -> ProcessorWriter:
    dlq = DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws")
    sample = SampleBuffer(stores.documents, "abc", capacity=capacity)
    return ProcessorWriter(generation=1, stats=stats, sample=sample, dlq=dlq)


def test_a_replayed_batch_changes_nothing(stores: Stores) -> None:
    stats = LiveStats()
    writer = writer_for(stores, stats)
    writer.write(batch(0))
    writer.write(batch(0))  # Spark replays the last batch after a crash
    docs, total = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    assert total == 1
    assert docs[0]["_id"] == f"{0:024x}" and docs[0]["instanceName"] == "ws"
    assert docs[0]["dlqTime"] == datetime(2024, 1, 1, 0, 0, 5, tzinfo=UTC)
    assert docs[0]["doc"]["at"] == datetime(2024, 1, 1, tzinfo=UTC)
    messages, cursor = writer.sample.recent(10)
    assert messages == [{"n": 1, "x": 1.0}, {"_dlqMessage": dlq_record(0)}, {"n": 2}]
    assert cursor == "1.0.2"
    snapshot = stats.snapshot()
    assert (snapshot["outputMessageCount"], snapshot["dlqMessageCount"]) == (2, 1)
    assert snapshot["outputMessageSize"] == len('{"n":1,"x":1.0}') + len('{"n":2}')
    assert (snapshot["stateSize"], snapshot["watermark"]) == (
        100,
        {"$date": "2024-01-01T00:00:09.999Z"},
    )


def test_the_sample_buffer_keeps_the_most_recent_messages(stores: Stores) -> None:
    buffer = SampleBuffer(stores.documents, "abc", capacity=4)
    for batch_id in range(5):
        buffer.append(
            1, batch_id, [(KIND_OUT, json.dumps({"b": batch_id, "i": i})) for i in range(2)]
        )
    assert stores.documents.count("sluice", "samples.abc") <= 6
    messages, cursor = buffer.recent(3)
    assert messages == [{"b": 3, "i": 1}, {"b": 4, "i": 0}, {"b": 4, "i": 1}]
    newer, _ = buffer.recent(10, after="1.3.1")
    assert newer == [{"b": 4, "i": 0}, {"b": 4, "i": 1}]
    buffer.append(2, 0, [(KIND_OUT, '{"g": 2}')])  # a fresh checkpoint restarts batch ids
    assert buffer.recent(1)[0] == [{"g": 2}]
    with pytest.raises(ValueError, match="cursor"):
        parse_cursor("1.2")


def test_a_restarted_service_reads_back_the_sample_it_wrote(stores: Stores) -> None:
    """What a new buffer loads from the store equals what the writing one serves: messages
    inserted as text, a replay with fewer messages, text with escapes and a lone surrogate."""
    buffer = SampleBuffer(stores.documents, "abc", capacity=5)
    odd = ['{"s":"\\u00e9 \u2713 \\"q\\" \\\\"}', '{"s":"\ud800"}', '{"d":{"$date":1}}']
    buffer.append(1, 0, [(KIND_OUT, text) for text in odd])
    buffer.append(1, 1, [(KIND_OUT, '{"n":1}'), (KIND_DLQ, '{"n":2}'), (KIND_OUT, '{"n":3}')])
    buffer.append(1, 1, [(KIND_OUT, '{"n":1}')], first_index=2)  # a replay keeps fewer
    buffer.append(1, 2, [(KIND_OUT, '{"n":4}')])
    written = buffer.recent(10)
    assert written[0][2:] == [{"n": 1}, {"n": 4}]  # the first message fell out of 5
    assert SampleBuffer(stores.documents, "abc", capacity=5).recent(10) == written


def test_odd_documents_still_reach_the_dlq(stores: Stores) -> None:
    record = dlq_record(7)
    record["doc"] = {"when": {"$date": "not a date"}}
    DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws").write([record])
    docs, total = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    assert total == 1


def test_the_dlq_store_is_opened_on_first_write() -> None:
    opened: list[int] = []

    def open_store() -> Any:
        opened.append(1)
        raise ConnectionError("cluster down")

    writer = DlqWriter(open_store, processor="p", instance="ws")
    assert opened == []
    with pytest.raises(ConnectionError):
        writer.write([dlq_record(1)])


def test_stats_count_each_batch_once_per_generation_and_persist() -> None:
    from service.stores.stats_ledger import StatsLedger

    recorded: list[StatsLedger] = []

    def recorder(lane: str, generation: int, batch_id: int, part: Any, seed: Any) -> StatsLedger:
        base = recorded[-1] if recorded else StatsLedger.seeded(seed)
        recorded.append(base.record(lane, generation, batch_id, part) or base)
        return recorded[-1]

    stats = LiveStats(recorder=recorder)
    progress = {
        "batchId": 4,
        "numInputRows": 5,
        "observedMetrics": {"sluice_source_input": {"count": 5, "bytes": 50}},
        "durationMs": {"triggerExecution": 1200},
        "stateOperators": [{"memoryUsedBytes": 77}],
        "eventTime": {"watermark": "2024-01-01T00:00:00.000Z"},
    }
    assert stats.record_progress(progress)
    assert not stats.record_progress(progress)
    assert recorded[-1].current()["inputMessageCount"] == 5  # persisted with the batch
    stored = stats.to_record()
    assert "_cursor" not in stored and stored["inputMessageCount"] == 5
    again = LiveStats(stored, generation=1, ledger=recorded[-1], recorder=recorder)
    assert not again.record_progress(progress)  # the replay replaces, it does not add
    fresh = LiveStats(stored, generation=2, ledger=recorded[-1], recorder=recorder)
    assert fresh.record_progress(progress)  # resumeFromCheckpoint: false keeps the totals
    public = fresh.public(
        name="p",
        processor_id="i",
        status="running",
        last_state_change=datetime.now(tz=UTC),
        scale=1024,
    )
    assert public["inputMessageCount"] == 10 and public["inputMessageSize"] == 100 / 1024
    assert public["stateSize"] == 77 / 1024 and public["watermark"] == {
        "$date": "2024-01-01T00:00:00.000Z"
    }
    legacy = LiveStats({"inputMessageCount": 7, "_cursor": {"generation": 1}}, generation=1)
    assert legacy.totals["inputMessageCount"] == 7  # counts of earlier versions still show


def test_the_last_batch_shows_sparks_phases_of_its_duration() -> None:
    stats = LiveStats()
    durations = {"triggerExecution": 640, "addBatch": 410, "queryPlanning": 60, "walCommit": 21}
    assert stats.record_progress({"batchId": 3, "numInputRows": 1, "durationMs": durations})
    last = stats.to_record()["_lastBatch"]
    assert last["durationMs"] == 640
    assert last["phasesMs"] == {"addBatch": 410, "queryPlanning": 60, "walCommit": 21}


def test_error_summaries_drop_stack_traces() -> None:
    wrapped = (
        "An exception was raised by the Python Proxy. Return Message: +- Project [a]\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n    raise X\n'
        "pymongo.errors.ServerSelectionTimeoutError: 127.0.0.1:1: refused\n\nJVM stacktrace:\n\tat a.b"
    )
    assert (
        summarize_error(wrapped)
        == "pymongo.errors.ServerSelectionTimeoutError: 127.0.0.1:1: refused"
    )
    assert (
        summarize_error("[STREAM_FAILED] boom\nmore\nJVM stacktrace:\n\tat x")
        == "[STREAM_FAILED] boom"
    )


def test_metrics_text_format() -> None:
    now = datetime(2024, 1, 1, 0, 1, tzinfo=UTC)
    sample = ProcessorSample(
        name='we"ird',
        state="STARTED",
        running=True,
        stats={"inputMessageCount": 3, "watermark": {"$date": "2024-01-01T00:00:30.000Z"}},
        batch_duration_ms=1500,
    )
    text = render(
        [sample], ingest_accepted={"in": 4}, ingest_invalid={}, engine_state="ready", now=now
    )
    assert 'sluice_processor_input_messages_total{processor="we\\"ird"} 3' in text
    assert 'sluice_processor_watermark_lag_seconds{processor="we\\"ird"} 30' in text
    assert 'sluice_processor_batch_duration_seconds{processor="we\\"ird"} 1.5' in text
    assert 'sluice_ingest_records_total{connection="in"} 4' in text
    assert "sluice_engine_ready 1" in text
    assert all(line.startswith(("#", "sluice_")) for line in text.strip().splitlines())


def test_a_watermark_read_back_from_the_store_keeps_its_ejson_form() -> None:
    """The store decodes `{"$date": ...}` into a datetime; the API schema needs the EJSON form."""
    stored = {"watermark": datetime(2024, 1, 1, 0, 0, 9, 999_000, tzinfo=UTC)}
    stats = LiveStats(stored)
    assert stats.watermark == {"$date": "2024-01-01T00:00:09.999Z"}
    assert LiveStats({"watermark": {"$date": "2024-01-01T00:00:01.000Z"}}).watermark == {
        "$date": "2024-01-01T00:00:01.000Z"
    }


def _sink_batch(batch_id: int, acknowledged: int) -> BatchResult:
    """A batch the `$https` sink wrote on the executors: 3 documents, its request counts."""
    result = BatchResult(batch_id=batch_id, input={"count": 3, "bytes": 30})
    result.totals = OutputTotals(produced=3, written=3, written_bytes=30, first_message=0)
    result.operators = request_counts(
        SinkRequests("HttpsOperator", 3, acknowledged, (4.0, 4.0, 300.0))
    )
    return result


def _https_entry(stats: LiveStats) -> dict[str, Any]:
    public = stats.public(
        name="p",
        processor_id="i",
        status="running",
        last_state_change=datetime.now(tz=UTC),
        operators=["SourceOperator", "HttpsOperator"],
        verbose=True,
    )
    return {o["name"]: o for o in public["operatorStats"]}["HttpsOperator"]


def test_the_sinks_operator_stats_count_each_batch_once(stores: Stores) -> None:
    stats = LiveStats(input_from_progress=False)
    writer = writer_for(stores, stats)
    writer.write(_sink_batch(0, 3))
    writer.write(_sink_batch(0, 2))  # the replay after a crash: its counts replace the first
    writer.write(_sink_batch(1, 3))
    entry = _https_entry(stats)
    # The sink's own counts win over the processor's documents written for its entry.
    assert (entry["inputMessageCount"], entry["outputMessageCount"]) == (6, 5)
    assert entry["latencyMs"] == {"p50": 5.0, "p99": 500.0, "samples": 6}


class _CountingSink:
    """A driver-side sink that reports its requests (as `HttpsSinkWriter` does)."""

    def __init__(self) -> None:
        self.requests: SinkRequests | None = None

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        self.requests = SinkRequests("HttpsOperator", len(batch.outputs), 1, (1.0, 2.0))
        return []


def test_a_driver_side_sink_reports_its_requests_too(stores: Stores) -> None:
    stats = LiveStats(input_from_progress=False)
    dlq = DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws")
    sample = SampleBuffer(stores.documents, "abc", capacity=10)
    writer = ProcessorWriter(
        generation=1, stats=stats, sample=sample, dlq=dlq, sink=_CountingSink()
    )
    writer.write(batch(0))
    writer.write(batch(0))
    entry = _https_entry(stats)
    assert (entry["inputMessageCount"], entry["outputMessageCount"]) == (2, 1)
    assert entry["latencyMs"]["samples"] == 2


def _window_row(bucket: int, results: int, oldest: str, newest: str) -> dict[str, Any]:
    """A window operator's stats row (`runtime.operator.stats_doc`)."""
    return {
        "bucket": bucket,
        "stateOperator": "GroupOperator",
        "resultsOperator": "SortOperator",
        "openWindows": 2,
        "stateSize": 100,
        "minOpenWindowStartTime": {"$date": oldest},
        "maxOpenWindowStartTime": {"$date": newest},
        "outputMessageCount": results,
    }


def test_a_windows_operators_show_its_results_state_and_open_windows() -> None:
    stats = LiveStats(input_from_progress=False)

    def record(batch_id: int, *rows: dict[str, Any]) -> None:
        stats.record_batch(
            batch_id, output_sizes=[], dlq_records=[], window_stats=rows, input_metrics=None
        )

    t0, t1, t2 = (f"2024-01-01T00:0{m}:00.000Z" for m in (0, 1, 2))
    record(0, _window_row(0, 3, t0, t1), _window_row(1, 2, t1, t2))
    record(0, _window_row(0, 3, t0, t1), _window_row(1, 2, t1, t2))  # replayed: no change
    record(1, _window_row(0, 4, t1, t2), _window_row(1, 0, t1, t1))
    public = stats.public(
        name="p",
        processor_id="i",
        status="running",
        last_state_change=datetime.now(tz=UTC),
        operators=["SourceOperator", "GroupOperator", "SortOperator", "MergeOperator"],
        verbose=True,
    )
    entries = {entry["name"]: entry for entry in public["operatorStats"]}
    assert entries["SortOperator"]["outputMessageCount"] == 9  # every bucket's results
    group = entries["GroupOperator"]
    assert (group["stateSize"], group["minOpenWindowStartTime"]) == (200, t1)
    assert group["maxOpenWindowStartTime"] == t2  # the newest over both buckets
    again = LiveStats(stats.to_record(), input_from_progress=False)
    persisted = again.public(
        name="p",
        processor_id="i",
        status="stopped",
        last_state_change=datetime.now(tz=UTC),
        operators=["GroupOperator"],
        verbose=True,
    )
    assert persisted["operatorStats"][0]["maxOpenWindowStartTime"] == t2
