"""Kafka `$source` bookkeeping without Spark or a broker: offsets, read limits, partition ids,
`_stream_meta.source`, key decoding. The stream reader (`sources.kafka`) and its unit tests
share these.

Offsets have the shape of Spark's own Kafka source, `{"<topic>": {"<partition>": next}}`,
where `next` is the next offset to read (the exclusive end of a micro-batch). Spark writes
the end offsets of every micro-batch to the checkpoint before running it, so a replayed batch
reads exactly the same `[start, end)` range per partition.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

Offsets = dict[str, dict[str, int]]

#: `part` of a record of topic number `i` (in `$source.topic` order) is `i * PART_STRIDE +
#: partition`: a stable integer per (topic, partition) that, for one topic, is the partition.
PART_STRIDE = 100_000

#: `$source.config.auto_offset_reset` values meaning "from the beginning".
EARLIEST = frozenset({"earliest", "beginning", "smallest"})

SOURCE_TYPE = "kafka"


class KeyFormatError(ValueError):
    """A message key does not decode with `$source.config.keyFormat`."""


def part_id(topic_index: int, partition: int) -> int:
    """The stable `part` of a (topic, partition); see `PART_STRIDE`."""
    if not 0 <= partition < PART_STRIDE:
        raise ValueError(f"Kafka partition {partition} is outside 0..{PART_STRIDE - 1}")
    return topic_index * PART_STRIDE + partition


def normalise(offsets: Mapping[str, Mapping[str, Any]]) -> Offsets:
    """Offsets with string partition keys and int values (JSON round trips keep neither)."""
    return {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}


def fill_missing(start: Offsets, latest: Offsets, earliest: Offsets) -> Offsets:
    """`start` plus the partitions that appeared since, starting at their earliest offset."""
    out = {t: dict(parts) for t, parts in start.items()}
    for topic, parts in latest.items():
        for partition in parts:
            out.setdefault(topic, {}).setdefault(
                partition, earliest.get(topic, {}).get(partition, 0)
            )
    return out


def bounded_end(start: Offsets, latest: Offsets, max_rows: int | None) -> Offsets:
    """The end of the next micro-batch: `latest`, or at most `max_rows` records past `start`.

    The bound is shared among partitions in proportion to their backlog (largest remainder),
    and a partition with backlog that would get nothing is served first, so a small bound
    never stalls a partition. Deterministic for the same inputs.
    """
    end = {t: dict(parts) for t, parts in start.items()}
    for topic, parts in latest.items():
        for partition, hi in parts.items():
            end.setdefault(topic, {})[partition] = max(hi, end[topic].get(partition, hi))
    keys = sorted((t, p) for t, parts in latest.items() for p in parts)
    backlog = {k: max(0, latest[k[0]][k[1]] - start.get(k[0], {}).get(k[1], 0)) for k in keys}
    total = sum(backlog.values())
    if max_rows is None or total <= max_rows:
        return end
    quota = {k: backlog[k] * max_rows // total for k in keys}
    left = max_rows - sum(quota.values())
    # Partitions without a share first, then by the largest fractional part.
    ranked = sorted(
        (k for k in keys if backlog[k] > quota[k]),
        key=lambda k: (quota[k] > 0, -(backlog[k] * max_rows % total), k),
    )
    for k in ranked[:left]:
        quota[k] += 1
    for topic, partition in keys:
        begin = start.get(topic, {}).get(partition, 0)
        end[topic][partition] = begin + quota[(topic, partition)]
    return end


def ranges(start: Offsets, end: Offsets, topics: Sequence[str]) -> list[tuple[str, int, int, int]]:
    """`(topic, partition, first, end)` per partition with records, in topic then partition
    order (a partition absent from `start` is new: it starts at 0, i.e. its earliest record)."""
    order = {t: i for i, t in enumerate(topics)}
    out = []
    for topic in sorted(end, key=lambda t: (order.get(t, len(order)), t)):
        for partition in sorted(end[topic], key=int):
            first = start.get(topic, {}).get(partition, 0)
            if end[topic][partition] > first:
                out.append((topic, int(partition), first, end[topic][partition]))
    return out


def split_ranges(
    found: Sequence[tuple[str, int, int, int]], *, tasks: int, min_rows: int
) -> list[tuple[str, int, int, int]]:
    """`ranges` cut so that a large backlog is read by about `tasks` tasks (Spark's Kafka
    `minPartitions`): each range gets pieces in proportion to its size, none under
    `min_rows` records. Pieces of a range stay in offset order, next to each other; the
    records and their `part`/`seq` are those of the uncut range."""
    total = sum(end - first for _, _, first, end in found)
    if tasks <= len(found) or total < 2 * min_rows:
        return list(found)
    out = []
    for topic, partition, first, end in found:
        size = end - first
        pieces = max(1, min(round(size * tasks / total), size // max(1, min_rows)))
        step = -(-size // pieces)
        for begin in range(first, end, step):
            out.append((topic, partition, begin, min(end, begin + step)))
    return out


def decode_key(key: bytes | None, key_format: str) -> Any:
    """The message key as Extended JSON, decoded per `keyFormat` (`int`/`long`/`double` are
    big-endian, as Atlas reads them); raises `KeyFormatError`."""
    if key is None:
        return None
    if key_format == "binData":
        return binary(key)
    try:
        if key_format == "string":
            return key.decode("utf-8")
        if key_format == "json":
            return json.loads(key.decode("utf-8"))
        if key_format == "int":
            return struct.unpack(">i", key)[0]
        if key_format == "long":
            return {"$numberLong": str(struct.unpack(">q", key)[0])}
        if key_format == "double":
            return struct.unpack(">d", key)[0]
    except (UnicodeDecodeError, ValueError, struct.error) as error:
        raise KeyFormatError(f"message key is not a valid {key_format}: {error}") from None
    raise KeyFormatError(f"unknown keyFormat {key_format!r}")


def binary(data: bytes) -> dict[str, Any]:
    """Relaxed Extended JSON of a BSON binary (subtype 0)."""
    return {"$binary": {"base64": base64.b64encode(data).decode("ascii"), "subType": "00"}}


def source_meta(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    key_format: str,
    key_format_error: str,
) -> str:
    """JSON of `_stream_meta.source` for one message (`headers` as Atlas's `[{k, v}]`, values
    binData). A key that does not decode is kept as binData and, with `keyFormatError:
    "dlq"`, flagged in `keyError` so the `$source` step sends the document to the DLQ."""
    meta: dict[str, Any] = {
        "type": SOURCE_TYPE,
        "topic": topic,
        "partition": partition,
        "offset": offset,
    }
    try:
        meta["key"] = decode_key(key, key_format)
    except KeyFormatError as error:
        meta["key"] = binary(key or b"")
        if key_format_error == "dlq":
            meta["keyError"] = str(error)
    meta["headers"] = [
        {"k": name, "v": None if value is None else binary(value)} for name, value in headers or ()
    ]
    return json.dumps(meta, allow_nan=False)
