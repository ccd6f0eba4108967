"""The API fuzzed against the real service: `sluice serve` (uvicorn, the Spark engine inside).

The fuzzer reads the service's own `/openapi.json` and runs all four of its phases (the
schema's examples, coverage of every boundary and type of every parameter and body field,
random fuzzing, and stateful sequences along the links it infers: create, then get, start,
stop, modify, delete) with every check it has (`--checks all`): no 5xx; status codes,
content types, headers and bodies as documented; schema-valid requests accepted and
schema-violating ones rejected; a missing or wrong API key refused; a deleted resource gone
(use after free) and a created one there (resource availability); `Allow` on 405s; methods
a route does not have refused; one tenant's objects not reachable without its key.

Seeded resources (see `seed`), and the configuration in `api_fuzz.toml` binds generated
path names to them at 80 % probability, so requests reach real processors (one started, a
real Spark query with a DLQ holding messages), real connections and the ingest spool.
Starting a processor from the fuzzer starts a Spark query too.

What the run changes, and why (nothing else is excluded, no operation is skipped):

* `positive_data_acceptance` is excluded on the command line and replaced by the hook
  `positive_data_acceptance_beyond_the_pipeline` (`api_fuzz_hooks.py`), which calls the
  built-in check on every operation and lets one answer through, on `POST /processors` and
  `PATCH /processors/{name}` only: a 422 `INVALID_PIPELINE` whose problems all lie inside
  `/pipeline` or at `/options/dlq/connectionName`. A pipeline is a program (stage order,
  stage bodies, MQL operators) of which a JSON Schema describes only the shape, and whether
  a name is a connection of the right kind is state no schema knows.
* `use_after_free` is excluded the same way and replaced by `use_after_free_beyond_dlq_purge`:
  `DELETE /processors/{name}/dlq` purges messages from a DLQ collection that stays, so a
  later `GET` of that collection answers 200 (and the messages left). Every other
  use-after-free, a deleted processor's DLQ included, still fails.
* `max_response_time` is 120 s instead of 10 s: this is a hang detector on a loaded 2-core
  runner, not a performance test.

The budget: `MAX_EXAMPLES` per operation and phase, and `max-steps` for stateful runs,
keep the run to a few minutes next to a JVM: about 1,500 generated cases, 1,460 requests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.service_process import ServiceProcess, clean_env, poll

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = Path(__file__).with_name("api_fuzz.toml")
#: Examples per operation and phase (coverage is exhaustive by design and takes no limit).
MAX_EXAMPLES = 25
#: Fixed, so that a failure in CI can be replayed with the same data.
SEED = 20261128

DLQ = {"connectionName": "local", "db": "fuzz", "coll": "dlq"}
SOURCE = {"$source": {"connectionName": "fuzz_in"}}
PROCESSORS: dict[str, list[dict[str, Any]]] = {
    "fuzz_p": [SOURCE, {"$match": {"kind": "reading"}}],
    "fuzz_started": [
        SOURCE,
        {"$addFields": {"ratio": {"$divide": ["$a", "$b"]}}},
        {"$project": {"_id": 0, "id": 1, "ratio": 1}},
    ],
    "fuzz_window": [
        {
            "$source": {
                "connectionName": "fuzz_in",
                "timeField": {"$dateFromString": {"dateString": "$t"}},
            }
        },
        {
            "$tumblingWindow": {
                "interval": {"size": 10, "unit": "second"},
                "pipeline": [{"$group": {"_id": "$k", "n": {"$sum": 1}}}],
            }
        },
    ],
}
RECORDS = [
    {"id": 1, "a": 6, "b": 3, "k": "x", "t": "2024-01-01T00:00:00Z"},
    {"id": 2, "a": 1, "b": 0, "k": "y", "t": "2024-01-01T00:00:01Z"},  # $divide by zero: DLQ
]


def seed(client: httpx.Client) -> None:
    """Connections, three processors (one started, with messages in its output and DLQ)."""
    for name in ("fuzz_in", "fuzz_spare"):
        created = client.post("/api/v1/connections", json={"name": name, "type": "HttpIngest"})
        assert created.status_code == 201, created.text
    for name, pipeline in PROCESSORS.items():
        body = {"name": name, "pipeline": pipeline, "options": {"dlq": DLQ}}
        created = client.post("/api/v1/processors", json=body)
        assert created.status_code == 201, created.text
    started = client.post("/api/v1/processors/fuzz_started:start")
    assert started.status_code == 200, started.text
    ingested = client.post("/api/v1/ingest/fuzz_in", json=RECORDS)
    assert ingested.status_code == 202, ingested.text

    def both_delivered() -> bool:
        messages = client.get("/api/v1/processors/fuzz_started/sample").json()["messages"]
        return len(messages) >= len(RECORDS)

    poll(both_delivered, timeout=300, message="the seeded processor delivered nothing")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    running = ServiceProcess(tmp_path_factory.mktemp("api-fuzz") / "data").start()
    try:
        with running.http() as client:
            seed(client)
        yield running
    finally:
        running.cleanup()


def fuzz_command(
    url: str, schema: Path, report: Path, *, max_examples: int = MAX_EXAMPLES
) -> list[str]:
    """The fuzzer's command line against `url` with the service's OpenAPI document saved in
    `schema` (the document needs the key: fetching it here keeps the key out of the
    fuzzer's own headers, which its auth checks vary; the key comes from the environment)."""
    return [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(CONFIG),
        "run",
        str(schema),
        "--url",
        url,
        "--checks",
        "all",
        # Replaced by their copies with one exemption each (api_fuzz_hooks.py).
        "--exclude-checks",
        "positive_data_acceptance,use_after_free",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(max_examples),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--request-timeout",
        "180",
        "--no-color",
        "--report",
        "ndjson",
        "--report-ndjson-path",
        str(report),
    ]


def _auth(service: ServiceProcess) -> dict[str, str]:
    """The bearer header: the OpenAPI document needs the key like the API does."""
    return {"Authorization": f"Bearer {service.api_key}"}


def _saved_schema(service: ServiceProcess, directory: Path) -> Path:
    """The service's OpenAPI document, fetched with the key, in a file for the fuzzer."""
    response = httpx.get(f"{service.url}/openapi.json", headers=_auth(service))
    assert response.status_code == 200, response.text
    path = directory / "openapi.json"
    path.write_bytes(response.content)
    return path


def fuzz_env(api_key: str, calls: Path) -> dict[str, str]:
    """The fuzzer's environment: its hooks, the key, the call log, this tree on the path."""
    return {
        **clean_env(),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "SCHEMATHESIS_HOOKS": "tests.e2e.api_fuzz_hooks",
        "SLUICE_FUZZ_KEY": api_key,
        "SLUICE_FUZZ_CALLS": str(calls),
    }


def calls_by_operation(calls: Path) -> Counter[tuple[str, int]]:
    """`(METHOD path, status)` -> how many requests the run made (from the hooks' log)."""
    found: Counter[tuple[str, int]] = Counter()
    for line in calls.read_text().splitlines():
        method, path, status = line.split(" ")
        found[(f"{method} {path}", int(status))] += 1
    return found


def test_the_longest_url_the_document_allows_gets_the_apis_answer(
    service: ServiceProcess,
) -> None:
    """Found by the fuzzer: a DLQ `reason` as long as documented, in four-byte characters,
    made a URL past uvicorn's 16 KiB head limit, and uvicorn answered a plain-text 400."""
    spec = httpx.get(f"{service.url}/openapi.json", headers=_auth(service)).json()
    parameters = spec["paths"]["/api/v1/processors/{name}/dlq"]["get"]["parameters"]
    longest = {
        p["name"]: max(s.get("maxLength", 0) for s in p["schema"]["anyOf"])
        for p in parameters
        if p["name"] in ("reason", "operatorName")
    }
    query = {name: "\U000a69c1" * length for name, length in longest.items()}
    with service.http() as client:
        answer = client.get("/api/v1/processors/fuzz_started/dlq", params=query)
    assert len(str(answer.request.url)) > 16 * 1024
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"results": [], "totalCount": 0}


def test_the_real_service_passes_every_fuzz_check(service: ServiceProcess, tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    run = subprocess.run(
        fuzz_command(service.url, _saved_schema(service, tmp_path), tmp_path / "fuzz.ndjson"),
        env=fuzz_env(service.api_key, calls),
        cwd=tmp_path,  # the fuzzer keeps its cache in the working directory
        capture_output=True,
        text=True,
        timeout=1800,
    )
    output = run.stdout + run.stderr
    print(output[-4000:])  # the fuzzer's summary, in the pytest log (-s, or on failure)
    assert run.returncode == 0, f"{output[-30000:]}\n--- service log ---\n{service.log_tail(80)}"
    generated = re.search(r"(\d+) generated, (\d+) passed", output)
    assert generated is not None and generated[1] == generated[2], output[-3000:]
    # Every operation the document has was called (a route added later counts itself in).
    spec = httpx.get(f"{service.url}/openapi.json", headers=_auth(service)).json()
    operations = sum(len(methods) for methods in spec["paths"].values())
    assert f"Tested: {operations}" in output, output[-3000:]
    assert "failure" not in output.split("SUMMARY")[-1]

    found = calls_by_operation(calls)
    spec = httpx.get(f"{service.url}/openapi.json", headers=_auth(service)).json()
    operations = {f"{m.upper()} {path}" for path, ops in spec["paths"].items() for m in ops}
    assert operations <= {operation for operation, _ in found}, "an operation was never called"
    assert not [key for key in found if key[1] >= 500]
    # The fuzzer itself started processors on the engine (not only the seeded one).
    assert found[("POST /api/v1/processors/{name}:start", 200)] > 0
    assert found[("POST /api/v1/processors/{name}:stop", 200)] > 0
    print(f"{sum(found.values())} requests; by operation and status: {sorted(found.items())}")
