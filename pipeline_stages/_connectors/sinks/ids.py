"""Deterministic ids for exactly-once sink effects, and the DLQ records of sink failures.

Spark replays the last micro-batch after a crash with the same batch id and the same rows, so
a sink is exactly-once in effect when writing a batch twice leaves what writing it once
left. Every output carries `Output.key` (`sink.output_key`): for a window result it is built
from the processor name, the window start and the group key; for any other document from the
processor name and the document's source position (partition, sequence, sub-position). Both
are independent of micro-batch boundaries. A document whose key repeats within a batch (an
`$unwind` after a window turns one result into several rows that share the window's key) is
numbered by its occurrence, which is stable because a batch's rows are sorted by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from pipeline_stages._stream.batch import Output, dlq_document, iso_millis, object_id


def effective_keys(outputs: Sequence[Output]) -> list[str]:
    """One distinct, replay-stable key per output of a batch (see the module docstring)."""
    seen: dict[str, int] = {}
    keys: list[str] = []
    for output in outputs:
        n = seen.get(output.key, 0)
        seen[output.key] = n + 1
        keys.append(output.key if n == 0 else object_id(output.key, n))
    return keys


def with_id(doc: dict[str, Any], key: str) -> dict[str, Any]:
    """`doc` with `_id` first set to the ObjectId of `key` when it has none (relaxed EJSON)."""
    if "_id" in doc:
        return doc
    return {"_id": {"$oid": key}, **doc}


def sink_dlq_record(
    doc_json: str,
    *,
    key: str,
    reason: str,
    operator: str,
    processor: str,
    now: datetime,
) -> dict[str, Any]:
    """Atlas's DLQ document (§6.2) for a document a sink could not write.

    The `_id` is deterministic (`sink_record_id`), so the record of a replayed batch
    overwrites the first one. `_stream_meta` is the document's own (sinks see documents, not
    their source metadata). A document no DLQ record can hold is kept as text
    (`dlq_document`).
    """
    held = dlq_document(doc_json)
    doc = held.get("doc")
    meta = doc.get("_stream_meta") if isinstance(doc, dict) else None
    return {
        "_id": {"$oid": sink_record_id(processor, operator, key)},
        "_stream_meta": meta if isinstance(meta, dict) else {},
        "errInfo": {"reason": reason},
        "operatorName": operator,
        **held,
        "processorName": processor,
        "dlqTime": {"$date": iso_millis(now)},
    }


def sink_record_id(processor: str, operator: str, key: str) -> str:
    """The DLQ record id of the output with effective key `key` that a sink did not write."""
    return object_id(processor, "sink", operator, key)


def unwritten_outputs(outputs: Sequence[Output], records: Sequence[dict[str, Any]]) -> set[int]:
    """The indexes of `outputs` that a sink's DLQ `records` (`sink_dlq_record`) stand for:
    the documents it did not write."""
    ids = {r["_id"]["$oid"] for r in records if isinstance(r.get("_id"), dict)}
    if not ids:
        return set()
    names = {(str(r.get("processorName")), str(r.get("operatorName"))) for r in records}
    return {
        index
        for index, key in enumerate(effective_keys(outputs))
        if any(sink_record_id(processor, operator, key) in ids for processor, operator in names)
    }


def write_error_reason(operator: str, message: str) -> str:
    """The DLQ reason of a sink write error, in the form of Atlas's operator errors."""
    return f"Failed to process input document in {operator} with error: {message}"


def failure_records(
    outputs: Sequence[Output],
    keys: Sequence[str],
    failures: Sequence[tuple[int, str]],
    *,
    operator: str,
    processor: str,
    now: datetime,
) -> list[dict[str, Any]]:
    """The DLQ records of `(output index, message)` failures, in output order."""
    return [
        sink_dlq_record(
            outputs[index].doc_json,
            key=keys[index],
            reason=write_error_reason(operator, message),
            operator=operator,
            processor=processor,
            now=now,
        )
        for index, message in sorted(failures)
    ]
