"""Per-operator stats of the enrichment stages: reading observed metrics, adding batches up,
the latency percentiles read from bucket counts, and a sink's requests counted in Python
(no Spark)."""

from __future__ import annotations

from pipeline_stages._enrichment.operator_stats import (
    LATENCY_BOUNDS_MS,
    METRIC_PREFIX,
    add_operators,
    latency_buckets,
    operator_counts,
    percentile_ms,
    public_stats,
    request_counts,
)
from pipeline_stages._stream.batch import SinkRequests

BUCKETS = len(LATENCY_BOUNDS_MS) + 1


def _row(**fields: int) -> dict[str, int]:
    row = {f"latency{i}": 0 for i in range(BUCKETS)}
    row.update(fields)
    return row


def test_metrics_are_read_per_operator_and_stages_of_one_name_add_up() -> None:
    observed = {
        f"{METRIC_PREFIX}LookUpOperator:/pipeline/1": _row(
            inputMessageCount=10, outputMessageCount=9, latency3=1
        ),
        f"{METRIC_PREFIX}LookUpOperator:/pipeline/2": _row(
            inputMessageCount=9, outputMessageCount=9, latency5=1
        ),
        f"{METRIC_PREFIX}CachedLookUpOperator:/pipeline/3": _row(
            inputMessageCount=9, outputMessageCount=9, cacheHitCount=4, cacheMissCount=2
        ),
        "sluice_input": {"count": 10, "bytes": 100},
    }
    counts = operator_counts(observed)
    assert set(counts) == {"LookUpOperator", "CachedLookUpOperator"}
    lookup = counts["LookUpOperator"]
    assert (lookup["inputMessageCount"], lookup["outputMessageCount"]) == (19, 18)
    assert lookup["latencyBuckets"][3] == 1 and lookup["latencyBuckets"][5] == 1
    assert "cacheHitCount" not in lookup
    cached = counts["CachedLookUpOperator"]
    assert (cached["cacheHitCount"], cached["cacheMissCount"]) == (4, 2)


def test_batches_add_up_bucket_by_bucket() -> None:
    one = operator_counts({f"{METRIC_PREFIX}HttpsOperator:/p/1": _row(inputMessageCount=2)})
    two = operator_counts(
        {f"{METRIC_PREFIX}HttpsOperator:/p/1": _row(inputMessageCount=3, latency0=3)}
    )
    total = add_operators(add_operators({}, one), two)["HttpsOperator"]
    assert total["inputMessageCount"] == 5
    assert total["latencyBuckets"][0] == 3 and sum(total["latencyBuckets"]) == 3


def test_percentiles_are_the_upper_bound_of_their_bucket() -> None:
    buckets = [0] * BUCKETS
    buckets[2] = 98  # (2, 5] ms
    buckets[9] = 2  # (500, 1000] ms
    assert percentile_ms(buckets, 0.5) == 5.0
    assert percentile_ms(buckets, 0.99) == 1000.0
    slow = [0] * BUCKETS
    slow[-1] = 1  # above the last bound
    assert percentile_ms(slow, 0.5) == float(LATENCY_BOUNDS_MS[-1])
    assert percentile_ms([0] * BUCKETS, 0.5) is None


def test_public_stats_show_latency_only_with_samples() -> None:
    assert "latencyMs" not in public_stats({"inputMessageCount": 1, "latencyBuckets": [0] * 3})
    shown = public_stats({"inputMessageCount": 1, "latencyBuckets": [1, 0, 0]})
    assert shown["latencyMs"] == {"p50": 1.0, "p99": 1.0, "samples": 1}


def test_latencies_fall_in_the_buckets_spark_counts_them_in() -> None:
    # Bucket i holds (bound[i - 1], bound[i]]; the last one what is above the last bound.
    samples = [0.0, 1.0, 1.01, 2.0, 49.9, 50.0, 50.5, 60000.0, 60000.1, 1e9]
    buckets = latency_buckets(samples)
    assert len(buckets) == BUCKETS
    expected = [0] * BUCKETS
    for index in (0, 0, 1, 1, 5, 5, 6, BUCKETS - 2, BUCKETS - 1, BUCKETS - 1):
        expected[index] += 1
    assert buckets == expected
    assert latency_buckets([]) == [0] * BUCKETS


def test_a_sinks_requests_become_its_operators_counts() -> None:
    first = request_counts(SinkRequests("HttpsOperator", 4, 3, (3.0, 4.0, 700.0)))
    second = request_counts(SinkRequests("HttpsOperator", 2, 2, (8.0, 9.0)))
    total = add_operators(first, second)["HttpsOperator"]
    assert (total["inputMessageCount"], total["outputMessageCount"]) == (6, 5)
    shown = public_stats(total)
    assert shown["latencyMs"] == {"p50": 10.0, "p99": 1000.0, "samples": 5}
    assert "cacheHitCount" not in shown
    # A partition whose documents were all refused before any request: no latency.
    assert "latencyMs" not in public_stats(
        request_counts(SinkRequests("HttpsOperator", 1, 0))["HttpsOperator"]
    )
