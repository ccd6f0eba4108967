"""Per-operator stats of the enrichment stages: documents in and out, DLQ'd, request and
lookup latencies, cache hits and misses, counted in Spark with the micro-batch.

The runners add two columns to the rows they return: `LATENCY_MS`, the time one store query
(`$lookup`, `$cachedLookup`: one per partition, or per `let` combination) or one HTTP request
(`$https`, retries included) took, set on one row per query; and `CACHE_HIT`, 1 or 0 on one
row per distinct key `$cachedLookup` looked up in its cache. `observe_operator` aggregates
them under an observed metric named after the operator and its stage path
(`METRIC_PREFIX`), which the engine reads inside the batch with the input counts
(`_engine/observed.py`). Latencies are kept as counts per bucket (`LATENCY_BOUNDS_MS`), which
add up over batches, so p50 and p99 of a processor's whole life are read from the sums: a
percentile is reported as the upper bound of the bucket it falls in.

A sink that makes one request per document (`$https` as the last stage) counts in Python
where it writes, on the executors: `request_counts` turns what it did with a partition
(`_stream.outputs.SinkRequests`) into the same counters and buckets, which travel to the
driver in the partition's summary (`_engine.partitions`) and reach the stats with the batch
(`BatchResult.operators`), so a replayed batch replaces them like every other count.

Plain Python at import (the service reads the metrics with it); Spark only inside
`observe_operator`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pipeline_stages._stream.stage_counts import METRIC_PREFIX

if TYPE_CHECKING:
    from pipeline_stages._stream.batch import SinkRequests

#: Columns the runners add (see the module docstring).
LATENCY_MS = "__operator_latency_ms__"
CACHE_HIT = "__operator_cache_hit__"
#: Upper bounds (ms) of the latency buckets; a last bucket holds everything above.
LATENCY_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000)
#: The counters of one operator (besides `latencyBuckets`).
COUNTS = ("inputMessageCount", "outputMessageCount", "cacheHitCount", "cacheMissCount")


def observe_operator(
    df: Any, *, operator: str, path: str, healthy: str, error: str, cached: bool
) -> Any:
    """`df` (a runner's output, with `healthy` and `error` columns) observed under the
    operator's metric."""
    from pyspark.sql import functions as F

    def count(condition: Any) -> Any:
        return F.coalesce(F.sum(F.when(condition, 1).otherwise(0)), F.lit(0))

    ok = F.col(healthy)
    latency = F.col(LATENCY_MS)
    aggregates = [
        count(ok).alias("inputMessageCount"),
        count(ok & F.col(error).isNull()).alias("outputMessageCount"),
    ]
    if cached:
        aggregates.append(count(F.col(CACHE_HIT) == 1).alias("cacheHitCount"))
        aggregates.append(count(F.col(CACHE_HIT) == 0).alias("cacheMissCount"))
    lower = None
    for index, bound in enumerate((*LATENCY_BOUNDS_MS, None)):
        inside = latency.isNotNull()
        if lower is not None:
            inside = inside & (latency > lower)
        if bound is not None:
            inside = inside & (latency <= bound)
        aggregates.append(count(inside).alias(f"latency{index}"))
        lower = bound
    return df.observe(f"{METRIC_PREFIX}{operator}:{path}", *aggregates)


def latency_buckets(latencies_ms: Iterable[float]) -> list[int]:
    """Latencies counted per bucket, as `observe_operator` counts them in Spark: bucket `i`
    holds `(LATENCY_BOUNDS_MS[i - 1], LATENCY_BOUNDS_MS[i]]`, the last one what is above."""
    buckets = [0] * (len(LATENCY_BOUNDS_MS) + 1)
    for latency in latencies_ms:
        buckets[bisect_left(LATENCY_BOUNDS_MS, latency)] += 1
    return buckets


def request_counts(requests: SinkRequests) -> dict[str, dict[str, Any]]:
    """`{operator: counts}` of what a sink did with one partition's documents: documents
    received, requests acknowledged, and each request's latency."""
    return {
        requests.operator: {
            "inputMessageCount": requests.received,
            "outputMessageCount": requests.acknowledged,
            "latencyBuckets": latency_buckets(requests.latencies_ms),
        }
    }


def operator_counts(observed: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """`{operator: {counters..., "latencyBuckets": [...]}}` of a batch's observed metrics
    (`{metric name: {field: value}}`); stages sharing an operator name are added up."""
    out: dict[str, dict[str, Any]] = {}
    for name, row in observed.items():
        if not name.startswith(METRIC_PREFIX):
            continue
        operator = name[len(METRIC_PREFIX) :].split(":", 1)[0]
        part: dict[str, Any] = {k: int(row.get(k, 0) or 0) for k in COUNTS if k in row}
        part["latencyBuckets"] = [
            int(row.get(f"latency{i}", 0) or 0) for i in range(len(LATENCY_BOUNDS_MS) + 1)
        ]
        out[operator] = add_operator(out.get(operator, {}), part)
    return out


def add_operator(left: Mapping[str, Any], right: Mapping[str, Any]) -> dict[str, Any]:
    """Two operator counts added up (counters, and latency buckets one by one)."""
    out: dict[str, Any] = {
        k: int(left.get(k, 0)) + int(right.get(k, 0)) for k in COUNTS if k in left or k in right
    }
    a, b = list(left.get("latencyBuckets") or []), list(right.get("latencyBuckets") or [])
    width = max(len(a), len(b))
    a += [0] * (width - len(a))
    b += [0] * (width - len(b))
    out["latencyBuckets"] = [int(x) + int(y) for x, y in zip(a, b, strict=True)]
    return out


def add_operators(
    left: Mapping[str, Mapping[str, Any]], right: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Every operator's counts of `left` and `right` added up."""
    out = {name: dict(counts) for name, counts in left.items()}
    for name, counts in right.items():
        out[name] = add_operator(out.get(name, {}), counts)
    return out


def percentile_ms(buckets: list[int], quantile: float) -> float | None:
    """The upper bound (ms) of the bucket holding the `quantile` of the samples (None without
    samples; the last bound for samples above it)."""
    total = sum(buckets)
    if total == 0:
        return None
    seen = 0
    for index, count in enumerate(buckets):
        seen += count
        if seen >= quantile * total:
            return float(LATENCY_BOUNDS_MS[min(index, len(LATENCY_BOUNDS_MS) - 1)])
    return float(LATENCY_BOUNDS_MS[-1])


def public_stats(counts: Mapping[str, Any]) -> dict[str, Any]:
    """An operator's counts as the stats show them: counters, and `latencyMs` p50/p99."""
    out: dict[str, Any] = {k: counts[k] for k in COUNTS if k in counts}
    buckets = list(counts.get("latencyBuckets") or [])
    if sum(buckets):
        out["latencyMs"] = {
            "p50": percentile_ms(buckets, 0.5),
            "p99": percentile_ms(buckets, 0.99),
            "samples": sum(buckets),
        }
    return out
