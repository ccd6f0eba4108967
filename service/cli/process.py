"""`sluice process`: through a running service when one answers, else on a local SparkSession.

A service is looked for as by every other client command (`service.cli.client.resolve_target`).
When it answers `/healthz`, the pipeline runs there as an ephemeral processor on its warm
SparkSession (`POST /api/v1/pipelines:process`) and its NDJSON frames are turned back into
what `sluice process --local` prints: the same stdout lines, byte for byte, the same stderr
lines and the same exit codes (`service.manager.ephemeral` describes the frames). Closing the
connection (the command ends or is killed) stops the ephemeral processor.

With no service (nothing listening, or no healthy answer in `PROBE_SECONDS`) the run is local,
as `--local` forces; so it is, with a warning on stderr, when the service refuses the run
(a wrong API key, an older service without the route, Spark unavailable there).
"""

from __future__ import annotations

import json
from typing import Any, TextIO

import httpx

from service.cli.client import API, Target, http_client

EXIT_FAILED = 1
EXIT_INVALID = 2
#: How long a service has to answer `/healthz` before the run is local.
PROBE_SECONDS = 1.0
#: Statuses after which the run falls back to a local one (the pipeline may be fine).
_FALLBACK = frozenset({401, 403, 404, 405, 409, 503})


def pipeline_of(document: Any) -> Any:
    """The pipeline of a pipeline array or of `{"pipeline": [...], "options": {...}}`."""
    if isinstance(document, dict) and "pipeline" in document:
        return document["pipeline"]
    return document


def service_answers(target: Target) -> bool:
    """Whether a Sluice service answers at the target."""
    try:
        response = httpx.get(f"{target.url}/healthz", timeout=PROBE_SECONDS)
        return response.status_code == 200 and response.json().get("status") == "ok"
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def run_remote(
    document: Any,
    target: Target,
    *,
    out: TextIO,
    err: TextIO,
    batch_size: int | None,
    max_seconds: float,
) -> int | None:
    """Run on the service and print what it streams; None when the run should be local
    (a warning on `err` says why when the service answered but refused)."""
    if isinstance(document, dict) and set(document) - {"pipeline", "options"}:
        return None  # the local run reports the unknown field as it always has
    body: dict[str, Any] = {"pipeline": pipeline_of(document), "maxSeconds": max_seconds}
    if batch_size is not None:
        body["batchSize"] = batch_size
    # No read timeout: a run may print nothing for long (windows waiting on their idle timeout).
    with http_client(target, timeout=30.0) as http:
        timeout = httpx.Timeout(30.0, read=None)
        try:
            with http.stream(
                "POST", f"{API}/pipelines:process", json=body, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    response.read()
                    return _refused(response, err)
                return _relay(response.iter_lines(), out=out, err=err)
        except httpx.TransportError as error:
            err.write(json.dumps({"error": f"the service's stream broke off: {error}"}) + "\n")
            return EXIT_FAILED


def _refused(response: httpx.Response, err: TextIO) -> int | None:
    try:
        payload = response.json()
    except ValueError:
        payload = {"detail": response.text[:500]}
    if response.status_code == 422 and isinstance(payload, dict):
        problems = [
            {**p, "path": _local_path(str(p.get("path", "")))}
            for p in payload.get("problems") or []
            if isinstance(p, dict)
        ]
        if problems:
            answer: dict[str, Any] = {"problems": problems}
            if payload.get("warnings"):
                answer["warnings"] = payload["warnings"]
            err.write(json.dumps(answer) + "\n")
            return EXIT_INVALID
    detail = payload.get("detail") if isinstance(payload, dict) else payload
    if response.status_code in _FALLBACK:
        warning = f"the service refused the run ({response.status_code}: {detail}); running locally"
        err.write(json.dumps({"warning": warning}) + "\n")
        return None
    err.write(
        json.dumps({"error": f"the service answered {response.status_code}: {detail}"}) + "\n"
    )
    return EXIT_FAILED


def _local_path(path: str) -> str:
    """A body path (`/pipeline/0/$match`) as `sluice process --local` reports it (`/0/$match`)."""
    return path[len("/pipeline") :] if path.startswith("/pipeline") else path


def _relay(lines: Any, *, out: TextIO, err: TextIO) -> int:
    """Print the frames' lines; the exit code is the last frame's."""
    for line in lines:
        if line.startswith('{"out":') and line.endswith("}"):
            out.write(line[len('{"out":') : -1] + "\n")
            out.flush()
        elif line.startswith('{"err":') and line.endswith("}"):
            err.write(line[len('{"err":') : -1] + "\n")
            err.flush()
        elif line.strip():
            frame = json.loads(line)
            if "exit" in frame:
                return int(frame["exit"])
    err.write(json.dumps({"error": "the service ended the stream without an exit code"}) + "\n")
    return EXIT_FAILED
