"""Every value codec and sink encoder on extreme and malformed values (hypothesis, no Spark).

The rule they keep: a document's content makes a codec raise only its documented error
(`ValueError` and its subclasses, the stores' `InvalidDocument`, the Kafka writer's
`EmitValueError`), which the callers turn into a DLQ record; never `OverflowError`,
`RecursionError`, `UnicodeError` or `TypeError`, which would fail the batch. The writers
themselves (DLQ, sample buffer, `$merge` into `local`) never raise on content at all.
The same values through Spark and the real service: `tests/integration/test_poison_fuzz.py`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline_stages import parse_pipeline
from pipeline_stages._connectors.sinks import kafka_format as KF
from pipeline_stages._connectors.sinks.targets_grouping import stored_document
from pipeline_stages._connectors.sources.records import record_problem, source_record
from pipeline_stages._documents import ejson
from pipeline_stages._stream.batch import BatchResult, Output, dlq_document
from pipeline_stages._stream.json_text import json_depth, prefer_double
from service.manager.stats import LiveStats
from service.manager.writers import DlqWriter, ProcessorWriter, SampleBuffer
from service.runtime.sink_resources import ClusterClients, StoreSinkResources, build_run_sink
from service.stores import DlqQuery, InvalidDocument, Stores, open_stores
from service.stores.codec import from_storage_json, normalize_document, to_storage_json
from tests.fuzz_values import DATES, DOCUMENTS, VALUES, deep_text, dumps, nested

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(VALUES)
def test_extended_json_decoders_raise_only_value_errors(value: Any) -> None:
    ejson.from_relaxed_ejson(value)  # the stored form keeps what it cannot decode
    found = ejson.invalid_wrapper(value)
    try:
        ejson.from_relaxed_ejson(value, strict=True)
    except ejson.InvalidExtendedJson as error:
        assert found == (error.path, error.problem)
    else:
        assert found is None
    try:
        ejson.from_ejson(value)
    except ValueError:
        assert found is not None  # nothing the sources let through fails the window runtime
    if isinstance(value, dict):
        ejson.decode_stored_object(value)


@FUZZ
@given(DATES)
def test_dates_in_every_form_parse_or_raise_value_error(inner: Any) -> None:
    for offset in (True, False):
        try:
            parsed = ejson.parse_date(inner, require_offset=offset)
        except ValueError:
            continue
        assert ejson.MIN_DATE_MS <= ejson.date_to_ms(parsed) <= ejson.MAX_DATE_MS
        ejson.format_date(parsed)
        ejson.format_iso(parsed)


@FUZZ
@given(DOCUMENTS)
def test_the_stores_codec_raises_only_invalid_document(doc: dict[str, Any]) -> None:
    value = ejson.from_relaxed_ejson(doc)
    try:
        text = to_storage_json(value)
    except InvalidDocument:
        return
    round_trip = from_storage_json(text)
    if "NaN" not in text:
        assert round_trip == normalize_document(value) or "$" in text


@FUZZ
@given(VALUES)
def test_json_text_helpers_agree_with_the_parser(value: Any) -> None:
    text = dumps(value)
    assert json_depth(text) == _depth(value)
    parsed = json.loads(prefer_double(text))
    assert _same(parsed, json.loads(text))


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@FUZZ
@given(DOCUMENTS)
def test_sink_encoders_raise_only_their_documented_errors(doc: dict[str, Any]) -> None:
    text = dumps(doc)
    try:
        stored_document(text, id_key="0" * 24)
    except ValueError:
        pass
    dlq_document(text)
    for output_format, date_format in (
        ("relaxedJson", "default"),
        ("relaxedJson", "ISO8601"),
        ("canonicalJson", "default"),
        ("canonicalJson", "ISO8601"),
    ):
        try:
            KF.encode_value(text, output_format=output_format, date_format=date_format)
        except KF.EmitValueError:
            pass


@FUZZ
@given(DOCUMENTS)
def test_the_source_checks_never_raise(doc: dict[str, Any]) -> None:
    raw = dumps(doc).encode("utf-8", "surrogatepass")
    text, error = source_record(raw)
    verdict = record_problem(raw)
    assert text is not None and (error is None or verdict == error)
    text.encode("utf-8")  # Spark takes UTF-8 only: a reason naming a lone surrogate once
    (error or "").encode("utf-8")  # failed the whole query
    (verdict or "").encode("utf-8")


DEPTHS = [99, 100, 101, 999, 1000, 1001, 5000]


@pytest.mark.parametrize("depth", DEPTHS)
def test_deep_documents_meet_every_limit_with_a_reason(depth: int) -> None:
    text = deep_text(depth)
    assert json_depth(text) == depth
    verdict = record_problem(text.encode())
    assert (verdict is None) == (depth <= 1000), verdict
    assert source_record(text.encode())[1] is None  # Spark refuses what it cannot read
    held = dlq_document(text)
    assert ("doc" in held) == (depth <= 99)
    if depth <= 100:
        stored_document(text)
    else:
        with pytest.raises(ValueError, match=f"nests {depth} levels"):
            stored_document(text)
    try:
        KF.encode_value(text, output_format="canonicalJson", date_format="default")
    except KF.EmitValueError:
        assert depth > 101  # only what no collection holds either


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = open_stores(data_dir=tmp_path)
    yield opened
    opened.close()


def _record(n: int, doc: Any) -> dict[str, Any]:
    return {
        "_id": {"$oid": f"{n:024x}"},
        "_stream_meta": {"source": {"seq": n}},
        "errInfo": {"reason": "r"},
        "operatorName": "AddFieldsOperator",
        **dlq_document(doc if isinstance(doc, str) else dumps(doc)),
        "processorName": "p",
        "dlqTime": {"$date": "2024-01-01T00:00:00.000Z"},
    }


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(DOCUMENTS, min_size=1, max_size=6))
def test_the_writers_never_fail_on_content(stores: Stores, docs: list[dict[str, Any]]) -> None:
    into = {"connectionName": "local", "db": "fz", "coll": "out"}
    parsed = parse_pipeline(
        [{"$source": {"connectionName": "sample_stream_solar"}}, {"$merge": {"into": into}}]
    )
    resources = StoreSinkResources(local=stores.documents, connections={}, clients=ClusterClients())
    stats = LiveStats()
    writer = ProcessorWriter(
        generation=1,
        stats=stats,
        sample=SampleBuffer(stores.documents, "fz", capacity=100),
        dlq=DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws"),
        sink=build_run_sink(parsed, resources, processor="p", run_tag="t"),
    )
    batch = BatchResult(batch_id=_next_batch())
    texts = [dumps(d) for d in docs]
    batch.outputs = [Output(t, f"{batch.batch_id:012x}{i:012x}") for i, t in enumerate(texts)]
    batch.dlq = [_record(batch.batch_id * 100 + i, t) for i, t in enumerate(texts)]
    batch.order = [("out", i) for i in range(len(texts))] + [("dlq", i) for i in range(len(texts))]
    before = stats.snapshot()
    writer.write(batch)
    after = stats.snapshot()
    written = after["outputMessageCount"] - before["outputMessageCount"]
    failed = after["dlqMessageCount"] - before["dlqMessageCount"] - len(texts)
    assert written + failed == len(texts)
    _, stored = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    assert stored >= len(texts)
    messages, _ = writer.sample.recent(100)
    assert messages


_BATCHES = iter(range(1, 10**9))


def _next_batch() -> int:
    return next(_BATCHES)


def test_dlq_records_hold_any_document_the_writer_is_given(stores: Stores) -> None:
    writer = DlqWriter(lambda: stores.dlq("d", "dlq"), processor="p", instance="ws")
    odd: list[Any] = [
        {"s": "\ud800"},
        {"n": float("nan"), "i": float("inf")},
        {"big": 2**200},
        {"d": {"$date": "+10000-01-01T00:00:00Z"}},
        {"\x00key": 1},
        nested(150),
        "a raw string",
    ]
    records = [_record(i, doc) for i, doc in enumerate(odd)]
    records.append({**_record(99, 0), "doc": nested(3000)})  # handed over as a value
    writer.write(records)
    docs, total = stores.dlq("d", "dlq").find(DlqQuery(processor="p"))
    assert total == len(records)
    assert all(("doc" in d) != ("docText" in d) for d in docs)
    as_text = sorted(
        d["_stream_meta"] for d in docs if "docText" in d and isinstance(d["_stream_meta"], str)
    )
    assert as_text  # the surrogate and the 3000-level document at least
