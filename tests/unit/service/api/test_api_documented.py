"""The API does what its OpenAPI document says, case by case: regressions found by fuzzing the
real service (tests/e2e/test_api_fuzz.py), each checked here in process against the document
the app itself serves, so a drift between the two fails here first."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pipeline_stages import REGISTRY
from service.main import MAX_REQUEST_HEAD_BYTES
from tests.unit.service.api.app_client import api_client

SOURCE = {"$source": {"connectionName": "in1"}}
DLQ = {"connectionName": "local", "db": "d", "coll": "dlq"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with api_client(tmp_path) as test_client:
        test_client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
        body = {"name": "p1", "pipeline": [SOURCE], "options": {"dlq": DLQ}}
        assert test_client.post("/api/v1/processors", json=body).status_code == 201
        yield test_client


def schema_of(client: TestClient, name: str) -> dict[str, Any]:
    schema: dict[str, Any] = client.get("/openapi.json").json()["components"]["schemas"][name]
    return schema


def refused(response: Any) -> list[str]:
    assert response.status_code == 422, response.text
    return [p["path"] for p in response.json()["problems"]]


@pytest.mark.parametrize("value", [0, 1, "true", "false", None, [], {}])
def test_body_booleans_take_json_booleans_only(client: TestClient, value: Any) -> None:
    # `resumeFromCheckpoint: 0` started the processor (pydantic's lax mode read 0 as false).
    start = client.post("/api/v1/processors/p1:start", json={"resumeFromCheckpoint": value})
    assert refused(start) == ["/resumeFromCheckpoint"]
    modify = client.patch(
        "/api/v1/processors/p1", json={"options": {"resumeFromCheckpoint": value}}
    )
    assert refused(modify) == ["/options/resumeFromCheckpoint"]
    assert client.get("/api/v1/processors/p1").json()["state"] == "CREATED"
    started = client.post("/api/v1/processors/p1:start", json={"resumeFromCheckpoint": False})
    assert started.status_code == 200 and started.json()["state"] == "STARTED"


@pytest.mark.parametrize("rate", ["10", True])
def test_connection_numbers_take_json_numbers_only(client: TestClient, rate: Any) -> None:
    body = {"name": "s", "type": "Sample", "rate": rate}
    assert refused(client.post("/api/v1/connections", json=body)) == ["/Sample/rate"]
    body["rate"] = 10
    assert client.post("/api/v1/connections", json=body).status_code == 201


DIRECTORIES = [
    "/", "/a", "/a/", "/a/b.c", "/a/.b", "/a/..b", "/a/...",
    "", "a", "./a", "/a//", "//a", "/./a", "/a/.", "/a/..", "/..", "/a\x00b", "/a/../b",
    "0" * 300,
]  # fmt: skip


def test_a_file_directory_is_accepted_exactly_when_its_documented_pattern_matches(
    client: TestClient,
) -> None:
    # The fuzzer sent "000…" (documented: any string; refused: not absolute) and the
    # validator took "//a" and "/a//" (normpath keeps a leading "//"): the pattern is the rule.
    field = schema_of(client, "FileConnectionCreate")["properties"]["directory"]
    pattern = re.compile(field["pattern"])
    for i, directory in enumerate(DIRECTORIES):
        body = {"name": f"f{i}", "type": "File", "directory": directory}
        answer = client.post("/api/v1/connections", json=body)
        documented = pattern.search(directory) is not None
        assert (answer.status_code == 201) is documented, (directory, answer.text)
        assert documented is (directory in DIRECTORIES[:7])


def test_a_stage_is_documented_as_one_key_naming_a_stage_sluice_runs(
    client: TestClient,
) -> None:
    # `pipeline: [null]` fitted the documented `items: {}` and was refused.
    items = schema_of(client, "ProcessorCreate")["properties"]["pipeline"]["items"]
    assert items["type"] == "object"
    assert items["minProperties"] == items["maxProperties"] == 1
    assert items["propertyNames"]["enum"] == sorted(REGISTRY)
    for stage in (None, 5, {}, {"$match": {}, "$limit": 1}, {"$out": {}}):
        body = {"name": "q", "pipeline": [SOURCE, stage]}
        assert "/pipeline/1" in refused(client.post("/api/v1/processors", json=body))


def test_the_dlq_filter_is_documented_as_a_json_object(client: TestClient) -> None:
    # It was documented as any string, and "00" was refused as not JSON.
    for method in ("get", "delete"):
        operation = client.get("/openapi.json").json()["paths"]["/api/v1/processors/{name}/dlq"]
        (parameter,) = [p for p in operation[method]["parameters"] if p["name"] == "filter"]
        assert parameter["content"] == {"application/json": {"schema": {"type": "object"}}}
    ok = client.get("/api/v1/processors/p1/dlq", params={"filter": json.dumps({"a": 1})})
    assert ok.status_code == 200
    for text in ("00", "[]", "5"):
        bad = client.get("/api/v1/processors/p1/dlq", params={"filter": text})
        assert refused(bad) == ["/query/filter"]


@pytest.mark.parametrize("media", ["application/x-ndjson", "text/plain"])
def test_a_text_ingest_body_is_accepted_exactly_when_its_pattern_matches(
    client: TestClient, media: str
) -> None:
    # An empty NDJSON body fitted the documented `{type: string}` and was refused.
    body_doc = client.get("/openapi.json").json()["paths"]["/api/v1/ingest/{connectionName}"]
    pattern = re.compile(body_doc["post"]["requestBody"]["content"][media]["schema"]["pattern"])
    for text in [
        "",
        " \t\r\n\x0b\x0c",
        "\ufeff",
        "\ufeff \n",
        "0",
        " x ",
        "\ufeff\ufeff",
        " \ufeff",
        "\xa0",
    ]:
        answer = client.post(
            "/api/v1/ingest/in1", content=text.encode(), headers={"Content-Type": media}
        )
        assert (answer.status_code == 202) is (pattern.search(text) is not None), repr(text)


def test_every_url_the_document_allows_fits_the_servers_request_head(client: TestClient) -> None:
    # A DLQ `reason` of 10,000 four-byte characters made a 120 KB URL, past uvicorn's 16 KiB
    # default, which answered a plain-text 400 of its own. Every character percent-encodes
    # to at most 12 bytes; parameters without a maxLength (numbers, dates, enums, the JSON
    # filter) are given 1,000 characters.
    spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            longest = len(path) + 64 * 12
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                lengths = [s.get("maxLength") or 1000 for s in schema.get("anyOf", [schema])]
                longest += len(parameter["name"]) + 2 + 12 * max(lengths)
            assert longest < MAX_REQUEST_HEAD_BYTES // 2, (method, path, longest)
