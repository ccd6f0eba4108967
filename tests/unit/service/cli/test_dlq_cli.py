"""`sluice dlq list|show|replay` over the real app (in process, fake engine)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.cli.app import app
from service.cli.output import CliState
from service.config.settings import Settings
from service.main import create_app
from service.stores import open_stores
from tests.unit.service.fake_engine import FakeEngine

KEY = "cli-test-key-0123456789"
DLQ = {"connectionName": "local", "db": "d", "coll": "c"}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(data_dir=tmp_path, api_keys=[KEY])
    application = create_app(settings, engine=FakeEngine(), stores=open_stores(data_dir=tmp_path))
    with TestClient(application, headers={"Authorization": f"Bearer {KEY}"}) as client:
        for name in ("in1", "in2"):
            client.post("/api/v1/connections", json={"name": name, "type": "HttpIngest"})
        for name, source in (("p1", "in1"), ("p2", "in2")):
            body = {"name": name, "pipeline": [{"$source": {"connectionName": source}}]}
            client.post("/api/v1/processors", json={**body, "options": {"dlq": DLQ}})
        stores = open_stores(data_dir=tmp_path)
        stores.dlq("d", "c").upsert_many("p1", [_record(i) for i in range(4)])
        stores.close()
        yield client


def _record(i: int) -> dict[str, Any]:
    meta = {"source": {"type": "generated", "ts": datetime(2024, 1, 1, tzinfo=UTC)}}
    return {
        "_id": f"rec{i}",
        "_stream_meta": meta,
        "errInfo": {"reason": "Input document arrived late." if i % 2 else "Bad $divide"},
        "operatorName": "GroupOperator",
        "dlqTime": datetime(2024, 1, 1, 0, 0, i, tzinfo=UTC),
        "doc": {"_stream_meta": meta, "sensor": f"s{i}", "watts": i * 100},
        "processorName": "p1",
    }


def sluice(api: httpx.Client, *args: str) -> Any:
    return CliRunner().invoke(app, list(args), obj=CliState(http=api), env={"COLUMNS": "250"})


def test_the_list_shows_the_documents_own_fields_first(api: TestClient) -> None:
    listed = sluice(api, "dlq", "list", "p1")
    assert listed.exit_code == 0, listed.output
    rows = [line for line in listed.stdout.splitlines() if "rec" in line]
    assert len(rows) == 4
    assert rows[0].lstrip("│ ").startswith('{"sensor": "s0", "watts": 0}')
    assert "_stream_meta" not in listed.stdout
    assert "4 of 4" in listed.stdout


def test_reason_is_a_case_insensitive_substring(api: TestClient) -> None:
    late = sluice(api, "dlq", "list", "p1", "--reason", "ARRIVED LATE")
    assert "2 of 2" in late.stdout and "s1" in late.stdout and "s3" in late.stdout
    assert sluice(api, "dlq", "count", "p1", "--reason", "$divide").stdout.strip() == "2"


def test_show_prints_one_record_whole(api: TestClient) -> None:
    shown = sluice(api, "dlq", "show", "p1", "rec2")
    assert shown.exit_code == 0, shown.output
    record = json.loads(shown.stdout)
    assert record["_id"] == "rec2" and record["doc"]["watts"] == 200
    assert record["_stream_meta"]["source"]["type"] == "generated"
    missing = sluice(api, "dlq", "show", "p1", "nope")
    assert missing.exit_code == 1 and "no DLQ record" in missing.stderr


def test_replay_dry_run_then_for_real_then_skipped(api: TestClient) -> None:
    dry = sluice(
        api, "dlq", "replay", "p1", "--to-processor", "p2", "--reason", "late", "--dry-run"
    )
    assert dry.exit_code == 0, dry.output
    assert dry.stdout.startswith("would replay 2 record(s) to processor p2; skipped 0")
    done = sluice(api, "--json", "dlq", "replay", "p1", "--to-processor", "p2", "--reason", "late")
    assert json.loads(done.stdout) == {"replayed": 2, "skipped": 0, "notReplayable": 0}
    again = sluice(api, "dlq", "replay", "p1", "--to-processor", "p2")
    assert again.stdout.startswith("replayed 2 record(s) to processor p2; skipped 2")
    marked = sluice(api, "--json", "dlq", "list", "p1", "--replayed-to", "processor:p2")
    assert json.loads(marked.stdout)["totalCount"] == 4
    never = sluice(api, "--json", "dlq", "list", "p1", "--not-replayed")
    assert json.loads(never.stdout)["totalCount"] == 0


def test_replay_filter_goes_as_json(api: TestClient) -> None:
    args = ["dlq", "replay", "p1", "--to-connection", "in1", "--filter", '{"doc.watts": 300}']
    done = sluice(api, "--json", *args)
    assert json.loads(done.stdout)["replayed"] == 1


@pytest.mark.parametrize(
    "args",
    [
        ["dlq", "replay", "p1"],
        ["dlq", "replay", "p1", "--to-processor", "p2", "--to-connection", "in1"],
        ["dlq", "replay", "p1", "--to-processor", "p2", "--filter", "{no"],
    ],
)
def test_replay_usage_errors_exit_2(api: TestClient, args: list[str]) -> None:
    assert sluice(api, *args).exit_code == 2


def test_a_target_that_cannot_take_records_prints_the_problem(api: TestClient) -> None:
    refused = sluice(api, "dlq", "replay", "p1", "--to-connection", "local")
    assert refused.exit_code == 2
    assert "/target:" in refused.stderr
