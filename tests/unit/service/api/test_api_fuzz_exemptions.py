"""The exemptions the API fuzz run makes (tests/e2e/api_fuzz_hooks.py) stay narrow."""

from __future__ import annotations

from tests.e2e.api_fuzz_hooks import (
    is_dlq_list_after_purge,
    is_kafka_settings_error,
    is_pipeline_program_error,
)


def test_reading_a_purged_dlq_is_a_list_read() -> None:
    assert is_dlq_list_after_purge(
        "DELETE /api/v1/processors/p1/dlq", "GET /api/v1/processors/p1/dlq"
    )


def test_reading_a_deleted_processors_dlq_is_still_use_after_free() -> None:
    assert not is_dlq_list_after_purge(
        "DELETE /api/v1/processors/p1", "GET /api/v1/processors/p1/dlq"
    )
    assert not is_dlq_list_after_purge(
        "DELETE /api/v1/processors/p1/dlq", "GET /api/v1/processors/p2/dlq"
    )
    assert not is_dlq_list_after_purge(
        "DELETE /api/v1/connections/c1", "GET /api/v1/connections/c1"
    )


def test_only_pipeline_problems_pass_as_program_errors() -> None:
    refused = {"errorCode": "INVALID_PIPELINE", "problems": [{"path": "/pipeline/1"}]}
    assert is_pipeline_program_error(422, refused)
    elsewhere = {"errorCode": "INVALID_PIPELINE", "problems": [{"path": "/name"}]}
    assert not is_pipeline_program_error(422, elsewhere)
    assert not is_pipeline_program_error(400, refused)
    assert not is_pipeline_program_error(422, {"errorCode": "INVALID_PIPELINE", "problems": []})


def test_only_the_kafka_clients_refusals_pass_as_settings_errors() -> None:
    def refused(path: str, message: str = "the Kafka client refuses this setting: x") -> dict:
        problem = {"code": "invalid_value", "path": path, "message": message}
        return {"errorCode": "INVALID_REQUEST", "problems": [problem]}

    assert is_kafka_settings_error(422, refused("/config/socket.timeout.msec"))
    assert is_kafka_settings_error(422, refused(""))
    assert not is_kafka_settings_error(422, refused("/bootstrapServers"))
    assert not is_kafka_settings_error(422, refused("/config/x", "too long"))
    assert not is_kafka_settings_error(400, refused("/config/x"))
    assert not is_kafka_settings_error(422, {"errorCode": "INVALID_REQUEST", "problems": []})
