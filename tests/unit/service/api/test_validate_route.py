"""`POST /api/v1/pipelines:validate`: the problems of `POST /processors`, with 200 and nothing stored."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.unit.service.api.app_client import api_client

ROUTE = "/api/v1/pipelines:validate"
SOURCE = {"$source": {"connectionName": "in1"}}
BROKEN = [
    {"$source": {"connectionName": "nope"}},
    {"$groop": {}},
    {"$addFields": {"a": {"$foo": 1}}},
    {"$match": {"b": {"$gtt": 1}}},
    {"$limit": 0},
]


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with api_client(tmp_path) as test_client:
        test_client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
        yield test_client


def _create_problems(client: TestClient, body: dict[str, Any]) -> list[dict[str, str]]:
    response = client.post("/api/v1/processors", json={"name": "p", **body})
    assert response.status_code == 422, response.text
    problems: list[dict[str, str]] = response.json()["problems"]
    return problems


@pytest.mark.parametrize(
    "body",
    [
        {"pipeline": BROKEN},
        {"pipeline": [SOURCE, {"$validate": {"validator": {}, "validationAction": "dlq"}}]},
        {
            "pipeline": [SOURCE],
            "options": {"dlq": {"connectionName": "missing", "db": "d", "coll": "c"}},
        },
        {
            "pipeline": [
                SOURCE,
                {"$merge": {"into": {"connectionName": "x", "db": "d", "coll": "c"}}},
            ]
        },
    ],
)
def test_the_problems_are_those_of_create(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post(ROUTE, json=body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["valid"] is False
    assert answer["problems"] == _create_problems(client, body)
    assert client.get("/api/v1/processors").json()["totalCount"] == 0


def test_unknown_operators_come_with_structural_problems(client: TestClient) -> None:
    answer = client.post(ROUTE, json={"pipeline": BROKEN}).json()
    found = {(p["code"], p["path"]) for p in answer["problems"]}
    assert {
        ("unknown_connection", "/pipeline/0/$source/connectionName"),
        ("unknown_stage", "/pipeline/1"),
        ("unknown_operator", "/pipeline/2/$addFields/a/$foo"),
        ("unknown_operator", "/pipeline/3/$match/b/$gtt"),
        ("greater_than", "/pipeline/4/$limit"),
    } <= found


def test_a_valid_pipeline_is_valid_with_its_warnings(client: TestClient) -> None:
    window = {
        "$tumblingWindow": {
            "interval": {"size": 1, "unit": "second"},
            "allowedLateness": {"size": 1, "unit": "second"},
            "pipeline": [{"$group": {"_id": None, "n": {"$sum": 1}}}],
        }
    }
    answer = client.post(ROUTE, json={"pipeline": [SOURCE, window]}).json()
    assert answer["valid"] is True and answer["problems"] == []
    assert answer["compiled"] is True  # the fake engine is ready
    assert "late_data_dropped" in [w["code"] for w in answer["warnings"]]
    created = client.post("/api/v1/processors", json={"name": "w", "pipeline": [SOURCE, window]})
    assert answer["warnings"] == created.json()["warnings"]


def test_an_empty_pipeline_is_a_pipeline_problem(client: TestClient) -> None:
    answer = client.post(ROUTE, json={"pipeline": []}).json()
    assert answer["valid"] is False
    assert [(p["code"], p["path"]) for p in answer["problems"]] == [("too_short", "/pipeline")]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({}, "/pipeline"),
        ({"pipeline": {"$source": {}}}, "/pipeline"),
        ({"pipeline": [SOURCE], "extra": 1}, "/extra"),
        ({"pipeline": [SOURCE], "options": {"dlq": 5}}, "/options/dlq"),
    ],
)
def test_a_body_of_another_shape_is_422_with_its_path(
    client: TestClient, body: dict[str, Any], path: str
) -> None:
    response = client.post(ROUTE, json=body)
    assert response.status_code == 422, response.text
    assert path in [p["path"] for p in response.json()["problems"]]


def test_a_key_is_required(client: TestClient) -> None:
    response = client.post(ROUTE, json={"pipeline": [SOURCE]}, headers={"Authorization": ""})
    assert response.status_code == 401
    assert response.json()["errorCode"] == "UNAUTHORIZED"
