import json

from service.manager.source_lag import kafka_lag


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
