"""The console in a real headless Chromium against a real `sluice serve` with a windowed
processor on Spark: log in, watch rates and lag move, open a DLQ record, replay it into another
processor, create a processor from an invalid pipeline, stop it.

One service and one browser session serve the whole module (the tests run in file order and
build on each other). Every wait is a bounded wait on a DOM condition. Screenshots of each page
go to the test's temporary directory.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By

from tests.e2e.console_browser import Page, chromium
from tests.e2e.service_process import ServiceProcess

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.browser]

DLQ = {"connectionName": "local", "db": "console", "coll": "dlq"}
WINDOWED = [
    {"$source": {"connectionName": "readings", "timeField": {"$toDate": "$t"}}},
    {
        "$tumblingWindow": {
            "interval": {"size": 2, "unit": "second"},
            "allowedLateness": {"size": 0, "unit": "second"},
            "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
        }
    },
]
CORRECTIONS = [
    {"$source": {"connectionName": "corrections_in"}},
    {"$addFields": {"corrected": True}},
]
SECRET = "Bearer s3cret-console-token"
BAD_PATH = "/pipeline/1/$tumblingWindow/interval/size"


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


class Feeder:
    """Posts a reading stamped "now" every `every` seconds until stopped: a live stream."""

    def __init__(self, client: httpx.Client, *, every: float = 0.3) -> None:
        self.client = client
        self.every = every
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Feeder:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            record = {"id": self.sent, "k": "a", "v": 1, "t": iso(datetime.now(UTC))}
            self.client.post("/api/v1/ingest/readings", json=[record])
            self.sent += 1
            self._stop.wait(self.every)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    data = tmp_path_factory.mktemp("console-service") / "data"
    proc = ServiceProcess(data)
    try:
        proc.start()
        with proc.http() as client:
            for name in ("readings", "corrections_in"):
                assert (
                    client.post(
                        "/api/v1/connections", json={"name": name, "type": "HttpIngest"}
                    ).status_code
                    == 201
                )
            for name, pipeline in (("windows_p", WINDOWED), ("corrections_p", CORRECTIONS)):
                body = {"name": name, "pipeline": pipeline, "options": {"dlq": DLQ}}
                created = client.post("/api/v1/processors", json=body)
                assert created.status_code == 201, created.text
                started = client.post(f"/api/v1/processors/{name}:start")
                assert started.status_code == 200, started.text
        yield proc
    finally:
        proc.cleanup()


@pytest.fixture(scope="module")
def page(service: ServiceProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    shots = tmp_path_factory.mktemp("console-screenshots")
    driver = chromium(shots)
    try:
        yield Page(driver, service.url, shots)
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def routes(service: ServiceProcess) -> set[str]:
    """The API paths this service has (the replay and validate routes come from a sibling
    change; the tests check the page's answer either way)."""
    with service.http() as client:
        return set(client.get("/openapi.json").json()["paths"])


def test_login_refuses_a_wrong_key_then_shows_the_processors(
    page: Page, service: ServiceProcess
) -> None:
    page.driver.get(service.url + "/")
    key = page.testid("login-key")
    page.screenshot("login")
    key.send_keys("not-the-key")
    page.testid("login-submit").click()
    assert "refused" in page.testid("login-error").text
    page.type_into(key, service.api_key)
    page.testid("login-submit").click()
    table = page.testid("processors-table")
    assert page.until(lambda: "windows_p" in table.text, timeout=30, what="windows_p listed")
    stored = page.driver.execute_script("return sessionStorage.getItem('sluice.apiKey')")
    assert stored == service.api_key
    assert page.driver.get_cookies() == []


def test_the_table_shows_rates_and_lag_moving(page: Page, service: ServiceProcess) -> None:
    row = page.testid("processor-row-windows_p")
    assert page.text_of("lag", within=row) == "no data"  # no watermark before any input
    assert page.text_of("open-windows", within=row) == "no data"
    with service.http() as client, Feeder(client):
        rate = page.until(
            lambda: _positive_rate(page.text_of("input", within=row)),
            timeout=240,
            what="a positive input rate for windows_p",
        )
        first_lag = page.until(
            lambda: _known(page.text_of("lag", within=row)),
            timeout=60,
            what="an event-time lag",
        )
        page.until(
            lambda: page.text_of("lag", within=row) not in ("no data", first_lag),
            timeout=60,
            what="the lag to change",
        )
        page.screenshot("processors")
    assert rate > 0
    assert page.text_of("state", within=row) == "STARTED"


def _known(text: str, *, needle: str = "") -> str | None:
    """The text once it is known ("no data" is not) and holds `needle`."""
    return text if text and text != "no data" and needle in text else None


def _positive_rate(text: str) -> float | None:
    head = text.split("/s")[0]
    try:
        value = float(head)
    except ValueError:
        return None
    return value if value > 0 else None


def test_the_processor_page_charts_its_history(page: Page, service: ServiceProcess) -> None:
    page.open("#/processors/windows_p")
    assert page.testid("processor-state").text == "STARTED"
    with service.http() as client, Feeder(client):
        chart = page.testid("chart-rates")
        page.until(
            lambda: int(chart.get_attribute("data-points") or 0) >= 3,
            timeout=60,
            what="three history points in the rate chart",
        )
        page.until(
            lambda: _positive_rate(page.text_of("input-rate")),
            timeout=60,
            what="a positive input rate",
        )
        page.until(lambda: page.text_of("output-sample") != "no data", timeout=120, what="output")
        # The window's $group row shows its state: size and the open windows' starts.
        page.until(
            lambda: " open 20" in page.text_of("operator-state-GroupOperator"),
            timeout=60,
            what="the $group's state in the operators table",
        )
    assert chart.find_elements(By.TAG_NAME, "canvas"), "uPlot drew no canvas"
    pipeline = page.testid("pipeline")
    assert pipeline.find_element(By.CSS_SELECTOR, '[data-path="/pipeline/1/$tumblingWindow"]')
    assert pipeline.find_elements(By.CSS_SELECTOR, ".j-key")  # highlighted
    page.screenshot("processor")


def test_a_dlq_record_opens_and_replays_into_another_processor(
    page: Page, service: ServiceProcess, routes: set[str]
) -> None:
    late = {"id": "late-1", "k": "z", "v": 7, "t": iso(datetime.now(UTC) - timedelta(hours=1))}
    with service.http() as client:
        assert client.post("/api/v1/ingest/readings", json=[late]).status_code == 202
    page.open("#/dlq/windows_p")
    record = page.testid("dlq-record-0", timeout=120)
    assert "arrived late" in record.text
    record.click()
    doc = page.testid("dlq-doc")
    assert '"late-1"' in doc.text
    assert "reason" in page.testid("dlq-errinfo").text
    assert "Input document arrived late." in page.testid("dlq-by-reason").text
    assert page.testid("chart-dlq-time").find_elements(By.TAG_NAME, "canvas")
    page.screenshot("dlq")
    one = page.testid("replay-one")
    page.select(page.testid("replay-target", within=one), "corrections_p")
    page.testid("replay-submit", within=one).click()
    result = page.testid("replay-result", within=one)
    if "/api/v1/processors/{name}/dlq:replay" not in routes:
        assert "no replay route" in result.text
        pytest.fail("the replay route is not on this branch: the replay part did not run")
    assert page.until(lambda: "replayed 1" in result.text, timeout=30, what="replayed 1")
    page.testid("replay-submit", within=one).click()  # at most once per target
    page.until(lambda: "replayed 0, skipped 1" in result.text, timeout=30, what="skipped 1")
    page.until(
        lambda: "processor:corrections_p" in page.text_of("replayed-to"),
        timeout=30,
        what="the record marked replayed to corrections_p",
    )
    page.open("#/processors/corrections_p")
    page.until(
        lambda: '"late-1"' in page.text_of("output-sample"),
        timeout=120,
        what="the replayed record in corrections_p's output",
    )
    page.screenshot("replayed")


def test_create_shows_problems_at_their_path_then_starts_and_stops(
    page: Page, routes: set[str]
) -> None:
    page.open("#/create")
    page.type_into(page.testid("create-name"), "made_p")
    bad = _pipeline(size=-1)
    page.type_into(page.testid("create-pipeline"), bad)
    if "/api/v1/pipelines:validate" not in routes:
        page.testid("create-submit").click()  # create's 422 carries the same problems
    preview = page.testid("create-preview")
    problem = page.until(
        lambda: next(iter(preview.find_elements(By.CSS_SELECTOR, ".problem")), None),
        timeout=30,
        what="a problem in the preview",
    )
    assert problem.get_attribute("data-path") == BAD_PATH
    node = preview.find_element(By.CSS_SELECTOR, f'[data-path="{BAD_PATH}"]')
    assert "has-problem" in (node.get_attribute("class") or "")
    page.screenshot("create")
    page.type_into(page.testid("create-pipeline"), _pipeline(size=5))
    if "/api/v1/pipelines:validate" in routes:
        page.until(lambda: page.text_of("problem-count") == "0", timeout=30, what="no problems")
    page.testid("create-start").click()
    page.until(lambda: page.text_of("processor-state") == "STARTED", timeout=120, what="STARTED")
    page.testid("start").click()
    message = page.until(
        lambda: _known(page.text_of("action-message"), needle="409"),
        timeout=30,
        what="a 409 explanation",
    )
    assert "INVALID_STATE_TRANSITION" in message and "start works from" in message
    page.testid("stop").click()
    page.until(lambda: page.text_of("processor-state") == "STOPPED", timeout=60, what="STOPPED")


def _pipeline(*, size: int) -> str:
    pipeline: list[dict[str, Any]] = [
        {"$source": {"connectionName": "readings"}},
        {
            "$tumblingWindow": {
                "interval": {"size": size, "unit": "second"},
                "pipeline": [{"$group": {"_id": None, "n": {"$sum": 1}}}],
            }
        },
    ]
    return json.dumps(pipeline, indent=2)


def test_connections_are_listed_without_secrets_and_created(page: Page) -> None:
    page.open("#/connections")
    table = page.testid("connections-table")
    page.until(lambda: "readings" in table.text, timeout=30, what="the readings connection")
    page.type_into(page.testid("connection-name"), "hooks")
    page.select(page.testid("connection-type"), "Https")
    settings = {"url": "https://hooks.example/in", "headers": {"Authorization": SECRET}}
    page.type_into(page.testid("connection-config"), json.dumps(settings))
    page.testid("connection-submit").click()
    assert "created hooks" in page.testid("connection-status").text
    row = page.testid("connection-hooks")
    assert "https://hooks.example/in" in row.text and "Https" in row.text
    assert SECRET not in page.driver.page_source  # not in the list, nor left in the form
    page.screenshot("connections")


class ProcessStream:
    """`sluice process` through the service (`POST /pipelines:process`) held open in a thread:
    the ephemeral processor lives while the stream is read."""

    def __init__(self, service: ServiceProcess, pipeline: list[dict[str, Any]]) -> None:
        self.frames: list[dict[str, Any]] = []
        self.started = threading.Event()
        self.ended = threading.Event()
        self._client = service.http()
        self._pipeline = pipeline
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> ProcessStream:
        self._thread.start()
        assert self.started.wait(120), f"no started frame: {self.frames}"
        return self

    def __exit__(self, *_: object) -> None:
        self._client.close()
        self._thread.join(timeout=60)

    @property
    def name(self) -> str:
        return str(self.frames[0]["started"]["name"])

    def _read(self) -> None:
        body = {"pipeline": self._pipeline, "maxSeconds": 300}
        try:
            with self._client.stream("POST", "/api/v1/pipelines:process", json=body) as response:
                for line in response.iter_lines():
                    self.frames.append(json.loads(line))
                    self.started.set()
        finally:
            self.started.set()
            self.ended.set()


def test_an_ephemeral_processor_opens_shows_its_output_and_stops(
    page: Page, service: ServiceProcess
) -> None:
    pipeline = [
        {"$source": {"connectionName": "sample_stream_solar"}},
        {"$addFields": {"seen": True}},
    ]
    with ProcessStream(service, pipeline) as stream:
        name = stream.name
        assert name.startswith("process-")
        page.open("#/processors")
        row = page.testid(f"processor-row-{name}", timeout=60)
        row.find_element(By.LINK_TEXT, name).click()
        page.until(lambda: page.text_of("processor-state") == "STARTED", timeout=30, what="STARTED")
        assert "ephemeral" in page.text_of("ephemeral")
        assert page.text_of("start") == ""  # an ephemeral processor cannot be restarted
        sample = page.until(
            lambda: _known(page.text_of("output-sample"), needle='"seen"'),
            timeout=120,
            what="the ephemeral processor's output",
        )
        assert '"device_id"' in sample
        page.screenshot("ephemeral")
        page.testid("stop").click()
        assert stream.ended.wait(60), "stopping in the console did not end the stream"
    assert "exit" in stream.frames[-1], stream.frames[-3:]
    assert any("out" in frame for frame in stream.frames)
    with service.http() as client:
        assert client.get(f"/api/v1/processors/{name}").status_code == 404  # it left the list


def test_screenshots_were_written(page: Page) -> None:
    names = sorted(p.stem for p in Path(page.shots).glob("*.png"))
    assert {"login", "processors", "processor", "dlq", "create", "connections"} <= set(names)
