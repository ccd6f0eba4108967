"""A micro-batch written where its partitions are: one Spark action, a small summary back.

`Summarizer` (one per query) runs `mapInArrow` over the batch's envelopes: each partition
(an executor's Python worker) hands its output documents to the sink in bulk
(`_stream.outputs.PartitionSink`) and yields only a summary: its DLQ and stats envelopes
(rare), the sink's DLQ records for the documents it could not write, the counts and bytes of
the documents written, the files it staged, the sink's own operator stats (`$https` as the
sink: its requests and their latencies, bucketed where they were made), and its last `tail`
outputs in emission order (what `sample` can show). The driver collects the summaries, which
is the batch's only action (the source is read once), and `assemble` turns them into a
`BatchResult` whose `outputs` are only the sampled tail (`BatchResult.totals` says so). No
document crosses into the driver otherwise.

The same code runs in the driver on rows the driver holds already (the batch window
engine's results, one per window and key: `summarize_rows`), and on the whole batch when
executors cannot reach the sink's store (`PartitionSink.on_executors` false: `local` behind
a remote cluster), so every path writes through the same bulk writers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.udf import UserDefinedFunction
from pyspark.util import PythonEvalType

from pipeline_stages._enrichment.operator_stats import add_operators, request_counts
from pipeline_stages._stream.batch import BatchResult, Output, OutputTotals, dlq_record
from pipeline_stages._stream.envelope import KIND_DLQ
from pipeline_stages._stream.frame import KIND_OUTPUT, KIND_STATS
from pipeline_stages._stream.outputs import PartitionOutputs, PartitionSink

#: Summary rows: the envelope's columns, plus counts (`n` written, `total` produced, `bytes`
#: written) on the partition's `count` row.
SUMMARY_SCHEMA = (
    "kind STRING, part INT, seq BIGINT, sub BIGINT, doc STRING, meta STRING, reason STRING, "
    "operator STRING, missed STRING, window_start BIGINT, window_key STRING, n BIGINT, "
    "total BIGINT, bytes BIGINT"
)
_STRING_COLUMNS = ("doc", "meta", "reason", "operator", "missed", "window_key")
ARROW_ENVELOPE = pa.schema(
    [
        ("kind", pa.string()),
        ("part", pa.int32()),
        ("seq", pa.int64()),
        ("sub", pa.int64()),
        *((name, pa.string()) for name in _STRING_COLUMNS[:-1]),
        ("window_start", pa.int64()),
        ("window_key", pa.string()),
    ]
)
ARROW_SUMMARY = pa.schema(
    [*ARROW_ENVELOPE, ("n", pa.int64()), ("total", pa.int64()), ("bytes", pa.int64())]
)

#: Summary row kinds besides the envelope's `out` (a sampled output), `dlq` and `stats`.
SINK_DLQ = "sinkdlq"
COUNT = "count"
STAGED = "staged"
#: A partition's sink operator stats (`doc`: `{operator: counts}` as JSON).
OPERATORS = "operators"
_ORDER = [("seq", "descending"), ("part", "descending"), ("sub", "descending")]
#: The Spark local property that carries the batch id to the tasks (set by the driver right
#: before the batch's action, so one pickled function serves every batch: see `Summarizer`).
BATCH_ID_PROPERTY = "sluice.batchId"


@dataclass(frozen=True)
class PartitionWork:
    """What each partition does (pickled to the executors with the sink).

    Attributes:
        processor: The processor name (output keys, DLQ records).
        sink: The sink, or None (outputs are only counted and sampled).
        tail: How many of the last messages a batch keeps for `sample`.
    """

    processor: str
    sink: PartitionSink | None
    tail: int

    @property
    def on_executors(self) -> bool:
        """Whether partitions are written on the executors (see the module docstring)."""
        return self.sink is None or self.sink.on_executors


class Summarizer:
    """A query's batches written where they are: its `mapInArrow` function built once.

    `DataFrame.mapInArrow` wraps its function in a new UDF on every call, and PySpark
    pickles a new UDF (the function and the sink it carries) into a new command per
    micro-batch. Here the UDF is built once per query and applied to each batch's rows; the
    tasks read the batch id from a local property the driver sets before the action,
    instead of from the pickled function (`benchmarks/RESULTS.md` has what it saves).
    """

    def __init__(self, work: PartitionWork) -> None:
        self.work = work
        self._udf: UserDefinedFunction | None = None

    def __call__(self, df: DataFrame, batch_id: int) -> list[dict[str, Any]]:
        """Write one micro-batch's envelopes and return the partitions' summary rows."""
        if not self.work.on_executors:
            table = df.toArrow()
            return _summary_rows(partition_summary(self.work, batch_id, table.to_batches(), 0, 0))
        if self._udf is None:
            # What `mapInArrow` builds per call (PySpark's `map_ops`), kept instead.
            self._udf = UserDefinedFunction(
                _PartitionTask(self.work),
                returnType=SUMMARY_SCHEMA,
                name="summarize_partition",
                evalType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF,
            )
        applied = self._udf(*(F.col(name) for name in df.columns))
        mapped = DataFrame(df._jdf.mapInArrow(applied._jc, False, None), df.sparkSession)
        df.sparkSession.sparkContext.setLocalProperty(BATCH_ID_PROPERTY, str(batch_id))
        return [row.asDict() for row in mapped.collect()]


def summarize_rows(rows: Sequence[Any], work: PartitionWork, batch_id: int) -> list[dict[str, Any]]:
    """The same for envelope rows the driver holds (the batch window engine's results)."""
    records = [{name: _field(row, name) for name in ARROW_ENVELOPE.names} for row in rows]
    batch = pa.RecordBatch.from_pylist(records, schema=ARROW_ENVELOPE)
    return _summary_rows(partition_summary(work, batch_id, [batch], 0, 0))


def _field(row: Any, name: str) -> Any:
    try:
        return row[name]
    except (KeyError, ValueError, IndexError):
        return None


def _summary_rows(batches: Iterable[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for batch in batches for row in batch.to_pylist()]


@dataclass(frozen=True)
class _PartitionTask:
    """The function each partition runs (pickled once per query, see `Summarizer`)."""

    work: PartitionWork

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        if context is None:
            raise RuntimeError("a partition's summary runs in a Spark task")
        batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
        if batch_id is None:
            raise RuntimeError(f"the task has no {BATCH_ID_PROPERTY} property")
        yield from partition_summary(
            self.work, int(batch_id), batches, context.partitionId(), context.attemptNumber()
        )


def partition_summary(
    work: PartitionWork,
    batch_id: int,
    batches: Iterable[pa.RecordBatch],
    partition: int,
    attempt: int,
) -> Iterator[pa.RecordBatch]:
    """Write one partition's outputs through the sink; yield its summary (one Arrow batch)."""
    found = list(batches)
    table = pa.Table.from_batches(found) if found else None
    if table is None or table.num_rows == 0:
        yield _count_batch(partition, 0, 0, 0)
        return
    is_output = pc.fill_null(pc.equal(table.column("kind"), KIND_OUTPUT), False)
    outputs = table.filter(is_output)
    rows: list[dict[str, Any]] = [
        {name: row.get(name) for name in ARROW_ENVELOPE.names}
        for row in table.filter(pc.invert(is_output)).to_pylist()
        if row["kind"] in (KIND_DLQ, KIND_STATS)
    ]
    total = int(outputs.num_rows)
    sizes = pc.binary_length(outputs.column("doc"))
    written_bytes = int(pc.sum(sizes).as_py() or 0)
    failures: list[tuple[int, dict[str, Any]]] = []
    if work.sink is not None and total:
        columns = PartitionOutputs(work.processor, outputs)
        result = work.sink.write_partition(batch_id, partition, attempt, columns)
        failures = result.failures
        rows.extend(_staged_row(directory, path) for directory, path in result.staged)
        if result.requests is not None:
            rows.append({"kind": OPERATORS, "doc": json.dumps(request_counts(result.requests))})
        for index, record in failures:
            seq, part, sub = columns.position(index)
            rows.append(
                {"kind": SINK_DLQ, "part": part, "seq": seq, "sub": sub, "doc": json.dumps(record)}
            )
            written_bytes -= len(columns.docs[index].encode("utf-8", "surrogatepass"))
    kept = outputs
    if total > work.tail:
        kept = outputs.take(pc.select_k_unstable(outputs, k=work.tail, sort_keys=_ORDER))
    for row in kept.select(["part", "seq", "sub", "doc"]).to_pylist():
        rows.append({"kind": KIND_OUTPUT, **row})
    rows.append(_count_row(partition, total - len(failures), total, written_bytes))
    yield pa.RecordBatch.from_pylist(rows, schema=ARROW_SUMMARY)


def _staged_row(directory: str, path: str) -> dict[str, Any]:
    return {"kind": STAGED, "doc": directory, "meta": path}


def _count_row(partition: int, written: int, total: int, size: int) -> dict[str, Any]:
    return {"kind": COUNT, "part": partition, "n": written, "total": total, "bytes": size}


def _count_batch(partition: int, written: int, total: int, size: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [_count_row(partition, written, total, size)], schema=ARROW_SUMMARY
    )


def _position(row: Mapping[str, Any]) -> tuple[int, int, int]:
    return (row["seq"] or 0, row["part"] or 0, row["sub"] or 0)


def assemble(
    work: PartitionWork,
    batch_id: int,
    rows: Sequence[Mapping[str, Any]],
    input_counts: dict[str, Any] | None,
) -> tuple[BatchResult, list[tuple[str, str]]]:
    """The batch as its writer sees it, from the partitions' summary rows, and the files the
    sink staged (to publish). `outputs` holds only the sampled tail: see the module doc."""
    now = datetime.now(tz=UTC)
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row)
    envelope_dlq = sorted(by_kind.get(KIND_DLQ, []), key=_position)
    sink_dlq = sorted(by_kind.get(SINK_DLQ, []), key=_position)
    batch = BatchResult(batch_id=batch_id, input=input_counts)
    batch.stats = [json.loads(row["doc"]) for row in by_kind.get(KIND_STATS, [])]
    batch.dlq = [dlq_record(row, processor=work.processor, now=now) for row in envelope_dlq]
    batch.dlq.extend(json.loads(row["doc"]) for row in sink_dlq)
    counts = by_kind.get(COUNT, [])
    produced = sum(int(row["total"] or 0) for row in counts)
    # The last `tail` messages: the partitions' last outputs and the DLQ envelopes in
    # emission order, then the sink's DLQ records (written after the batch's envelopes).
    tagged: list[tuple[tuple[int, int, int], str, Mapping[str, Any] | int]] = [
        (_position(row), KIND_OUTPUT, row) for row in by_kind.get(KIND_OUTPUT, [])
    ]
    tagged.extend((_position(row), KIND_DLQ, i) for i, row in enumerate(envelope_dlq))
    tagged.sort(key=lambda item: item[0])
    tagged.extend(((0, 0, 0), KIND_DLQ, len(envelope_dlq) + i) for i in range(len(sink_dlq)))
    kept = tagged[-work.tail :] if work.tail > 0 else []
    for _, kind, item in kept:
        if kind == KIND_OUTPUT and isinstance(item, Mapping):
            batch.order.append((KIND_OUTPUT, len(batch.outputs)))
            batch.outputs.append(Output(str(item["doc"]), ""))
        elif isinstance(item, int):
            batch.order.append((KIND_DLQ, item))
    batch.totals = OutputTotals(
        produced=produced,
        written=sum(int(row["n"] or 0) for row in counts),
        written_bytes=sum(int(row["bytes"] or 0) for row in counts),
        first_message=produced + len(envelope_dlq) + len(sink_dlq) - len(kept),
    )
    for row in by_kind.get(OPERATORS, []):
        batch.operators = add_operators(batch.operators, json.loads(row["doc"]))
    staged = [(str(row["doc"]), str(row["meta"])) for row in by_kind.get(STAGED, [])]
    return batch, staged
