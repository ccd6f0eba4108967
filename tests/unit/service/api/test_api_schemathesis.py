"""Property-based API fuzzing (schemathesis) against the OpenAPI spec: no 5xx, ever.

The app runs in process with the `FakeEngine` (no JVM): the Spark part is exercised by the
end-to-end tests; here every route, body and parameter the spec allows (and many it does
not) must get a 2xx/4xx answer with our error body, never a 500 or a stack trace.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from service.config.settings import Settings  # noqa: E402
from service.main import create_app  # noqa: E402
from service.stores import open_stores  # noqa: E402
from tests.unit.service.fake_engine import FakeEngine  # noqa: E402

KEY = "schemathesis-test-key-0123456789"
_DATA = Path(tempfile.mkdtemp(prefix="sluice-schemathesis-"))
APP = create_app(
    Settings(data_dir=_DATA, api_keys=[KEY]),
    engine=FakeEngine(),
    stores=open_stores(data_dir=_DATA),
)
SCHEMA = schemathesis.openapi.from_asgi(
    "/openapi.json", APP, headers={"Authorization": f"Bearer {KEY}"}
)


@schemathesis.serializer("application/x-ndjson")
def _ndjson(_ctx: object, value: object) -> bytes:
    """The ingest route's NDJSON body: its schema is a string, sent as UTF-8 text (without a
    serializer schemathesis skips every case with this media type)."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.encode("utf-8", "surrogatepass")


def _seed() -> None:
    """A connection and processors for the generated requests to hit (names are fuzzed too)."""
    from fastapi.testclient import TestClient

    # Not as a context manager: that would run the lifespan, whose shutdown closes the stores.
    client = TestClient(APP, headers={"Authorization": f"Bearer {KEY}"})
    client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
    pipeline = [{"$source": {"connectionName": "in1"}}, {"$match": {"a": 1}}]
    dlq = {"connectionName": "local", "db": "d", "coll": "dlq"}
    body = {"name": "p1", "pipeline": pipeline, "options": {"dlq": dlq}}
    assert client.post("/api/v1/processors", json=body).status_code == 201


_seed()


#: No 5xx, and every answer is documented: status code, content type and body schema.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@SCHEMA.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {KEY}"}, checks=CHECKS)
