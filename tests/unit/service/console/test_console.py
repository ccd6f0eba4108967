"""The console: its committed build matches its sources, `/` and its assets are public while
the API stays behind the key, and the stats history turns counters into rates and lag."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.config.settings import Settings
from service.console.assets import STATIC_DIR, built_sources_hash, sources_hash
from service.console.history import HistorySampler, StatsHistory
from service.main import create_app
from service.stores import open_stores
from tests.unit.service.fake_engine import FakeEngine

KEY = "unit-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
T0 = datetime(2024, 1, 1, tzinfo=UTC)
REBUILD = "run `npm ci && npm run build` in service/console/frontend and commit static/"


@pytest.fixture
def app(tmp_path: Path) -> FastAPI:
    settings = Settings(data_dir=tmp_path, api_keys=[KEY])
    return create_app(settings, engine=FakeEngine(), stores=open_stores(data_dir=tmp_path))


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


def test_the_committed_build_is_built_from_the_current_sources() -> None:
    assert built_sources_hash() is not None, REBUILD
    assert built_sources_hash() == sources_hash(), f"the console's build is stale: {REBUILD}"


def test_the_build_loads_nothing_from_other_hosts() -> None:
    index = (STATIC_DIR / "index.html").read_text()
    assets = re.findall(r'(?:src|href)="([^"]+)"', index)
    assert assets and all(a.startswith("/assets/") for a in assets), assets
    for asset in assets:
        assert (STATIC_DIR / asset.lstrip("/")).is_file(), asset
    assert not re.search(r'(?:src|href)="https?://', index)


def test_the_page_and_its_assets_are_public_and_the_api_is_not(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    script = re.search(r'src="(/assets/[^"]+\.js)"', page.text)
    assert script is not None
    asset = client.get(script.group(1))
    assert asset.status_code == 200 and "javascript" in asset.headers["content-type"]
    assert client.get("/api/v1/processors").status_code == 401
    assert client.get("/api/v1/processors/p1/stats/history").status_code == 401


def test_the_api_document_needs_the_key_and_no_docs_page_is_served(client: TestClient) -> None:
    refused = client.get("/openapi.json")
    assert refused.status_code == 401 and refused.json()["errorCode"] == "UNAUTHORIZED"
    assert client.get("/openapi.json", headers={"Authorization": "Bearer wrong"}).status_code == 401
    document = client.get("/openapi.json", headers=AUTH)
    assert document.status_code == 200
    assert "/api/v1/processors" in document.json()["paths"]
    assert "/openapi.json" not in document.json()["paths"]
    # The interactive pages loaded their scripts from a CDN and could not send the key.
    for page in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert client.get(page).status_code == 404, page
        assert client.get(page, headers=AUTH).status_code == 404, page


def test_history_route_is_documented_and_404s_for_unknown_processors(client: TestClient) -> None:
    paths = client.get("/openapi.json", headers=AUTH).json()["paths"]
    route = paths["/api/v1/processors/{name}/stats/history"]["get"]
    assert route["operationId"] == "processors-get_stats_history"
    missing = client.get("/api/v1/processors/nope/stats/history", headers=AUTH)
    assert missing.status_code == 404 and missing.json()["errorCode"] == "PROCESSOR_NOT_FOUND"


def test_history_route_serves_the_sampled_points(app: FastAPI, client: TestClient) -> None:
    client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"}, headers=AUTH)
    body = {"name": "p1", "pipeline": [{"$source": {"connectionName": "in1"}}]}
    assert client.post("/api/v1/processors", json=body, headers=AUTH).status_code == 201
    history: StatsHistory = app.state.stats_history
    before = len(client.get("/api/v1/processors/p1/stats/history", headers=AUTH).json()["points"])
    history.sample(at=T0)
    history.sample(at=T0 + timedelta(seconds=2))
    got = client.get("/api/v1/processors/p1/stats/history", headers=AUTH).json()
    assert got["name"] == "p1" and got["intervalSeconds"] == history.interval_seconds
    new = got["points"][before:]
    assert [p["time"] for p in new] == [T0.isoformat(), (T0 + timedelta(seconds=2)).isoformat()]
    assert new[-1]["inputRate"] == 0.0 and new[-1]["watermark"] is None
    assert new[-1]["eventTimeLagSeconds"] is None
    last = client.get("/api/v1/processors/p1/stats/history?last=1", headers=AUTH).json()
    assert last["points"] == got["points"][-1:]


def stats(name: str, *, n_in: int, n_out: int, dlq: Mapping[str, int], wm: str | None) -> Any:
    return {
        "name": name,
        "status": "running",
        "inputMessageCount": n_in,
        "outputMessageCount": n_out,
        "dlqMessageCount": sum(dlq.values()),
        "stateSize": 10,
        "watermark": {"$date": wm} if wm else None,
        "operatorStats": [{"name": k, "dlqMessageCount": v} for k, v in dlq.items()],
    }


class Feed:
    """The stats the history reads next (set by the test)."""

    def __init__(self) -> None:
        self.current: list[dict[str, Any]] = []

    def __call__(self) -> list[dict[str, Any]]:
        return self.current


def test_rates_are_deltas_per_second_and_lag_is_sample_time_minus_watermark() -> None:
    feed = Feed()
    history = StatsHistory(feed, interval_seconds=2, span_seconds=600)
    feed.current = [stats("a", n_in=10, n_out=1, dlq={"SourceOperator": 0}, wm=None)]
    history.sample(at=T0)
    feed.current = [
        stats("a", n_in=30, n_out=5, dlq={"SourceOperator": 4}, wm="2023-12-31T23:59:50Z")
    ]
    history.sample(at=T0 + timedelta(seconds=4))
    first, second = history.points("a")
    assert (first["inputRate"], first["outputRate"], first["dlqRate"]) == (None, None, None)
    assert first["eventTimeLagSeconds"] is None
    assert (second["inputRate"], second["outputRate"], second["dlqRate"]) == (5.0, 1.0, 1.0)
    assert second["dlqRateByOperator"] == {"SourceOperator": 1.0}
    assert second["eventTimeLagSeconds"] == 14.0


def test_a_counter_that_goes_back_has_no_rate_and_gone_processors_are_forgotten() -> None:
    feed = Feed()
    history = StatsHistory(feed, interval_seconds=2, span_seconds=600)
    feed.current = [stats("a", n_in=10, n_out=0, dlq={}, wm=None)]
    history.sample(at=T0)
    feed.current = [stats("a", n_in=3, n_out=0, dlq={}, wm=None)]  # dropped and re-created
    history.sample(at=T0 + timedelta(seconds=2))
    assert history.points("a")[-1]["inputRate"] is None
    feed.current = []
    history.sample(at=T0 + timedelta(seconds=4))
    assert history.points("a") == []


def test_the_ring_keeps_only_the_span() -> None:
    feed = Feed()
    history = StatsHistory(feed, interval_seconds=2, span_seconds=10)
    for i in range(20):
        feed.current = [stats("a", n_in=i, n_out=0, dlq={}, wm=None)]
        history.sample(at=T0 + timedelta(seconds=2 * i))
    points = history.points("a")
    assert len(points) == history.capacity == 6
    assert points[-1]["inputMessageCount"] == 19 and points[0]["inputMessageCount"] == 14


def test_the_sampler_samples_at_once_and_stops() -> None:
    feed = Feed()
    feed.current = [stats("a", n_in=1, n_out=0, dlq={}, wm=None)]
    history = StatsHistory(feed, interval_seconds=3600, span_seconds=7200)
    sampler = HistorySampler(history)
    sampler.start()
    sampler.stop()  # the first sample is taken before the first wait, so it is there now
    assert [p["inputMessageCount"] for p in history.points("a")] == [1]
