import json
from datetime import UTC, datetime

from pipeline_stages._connectors.sources.throttled import OFFSET_KEY
from service.manager.source_lag import kafka_lag
from service.manager.stats import LiveStats
from service.schemas.stats import ProcessorStats


def test_lag_per_partition_is_latest_minus_processed_with_a_total() -> None:
    source = {
        "latestOffset": json.dumps({"t": {"0": 10, "1": 7}}),
        "endOffset": {"t": {"0": 4, "1": 7}},
    }
    lag = kafka_lag(source)
    assert lag == {
        "partitions": [
            {"topic": "t", "partition": 0, "latestOffset": 10, "processedOffset": 4, "lag": 6},
            {"topic": "t", "partition": 1, "latestOffset": 7, "processedOffset": 7, "lag": 0},
        ],
        "totalLag": 6,
    }


def test_a_partition_not_yet_processed_has_unknown_lag_and_total() -> None:
    lag = kafka_lag({"latestOffset": {"t": {"0": 3, "1": 5}}, "endOffset": {"t": {"0": 3}}})
    assert lag is not None
    assert [row["lag"] for row in lag["partitions"]] == [0, None]
    assert lag["totalLag"] is None


def test_non_kafka_or_unknown_latest_offset_is_no_data() -> None:
    assert kafka_lag({"endOffset": {"t": {"0": 1}}}) is None
    assert kafka_lag({"latestOffset": "not json", "endOffset": "{}"}) is None
    assert kafka_lag({"latestOffset": {"offset": 5}, "endOffset": {"offset": 3}}) is None
    assert kafka_lag({"latestOffset": {"f": {"a": 5}}, "endOffset": {"f": {"a": 3}}}) is None


def test_a_throttled_kafka_source_has_its_lag_too() -> None:
    throttled = {"t": {"0": 2}, OFFSET_KEY: {"throttledTimeMs": 5, "throttleEvents": 1}}
    lag = kafka_lag({"latestOffset": {"t": {"0": 9}}, "endOffset": throttled})
    assert lag is not None and lag["totalLag"] == 7


def test_stats_carry_the_last_progress_lag_through_a_restart() -> None:
    progress = {
        "batchId": 0,
        "numInputRows": 3,
        "sources": [{"latestOffset": {"t": {"0": 10}}, "endOffset": {"t": {"0": 3}}}],
    }
    stats = LiveStats()
    stats.record_progress(progress)
    public = stats.public(
        name="p", processor_id="i", status="running", last_state_change=datetime.now(tz=UTC)
    )
    assert public["sourceLag"]["totalLag"] == 7
    assert ProcessorStats.model_validate(public).sourceLag is not None
    restored = LiveStats(stats.to_record())
    assert restored.source_lag == public["sourceLag"]
    # A source that reports no latest offset (a File source): no data, not 0.
    stats.record_progress({"batchId": 1, "sources": [{"endOffset": {"index": 4}}]})
    assert (
        stats.public(
            name="p", processor_id="i", status="running", last_state_change=datetime.now(tz=UTC)
        )["sourceLag"]
        is None
    )
