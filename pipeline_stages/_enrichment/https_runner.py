"""The per-partition side of `$https` in the middle of a pipeline (`mapInArrow`, executors).

The compiler puts each healthy document's request parts in string columns (the evaluated
`path`, `parameters`, `headers` and the request body, as JSON text); the runner sends a
partition's requests concurrently (`_connectors.http_client`) and adds the response, as JSON
text, and a per-row error. `onError` decides what a failed request (non-2xx after retries, a
timeout, a response that is not JSON) does: `dlq` sets the error (the document goes to the
DLQ with the status and the truncated body), `ignore` leaves the document as it was, `fail`
raises, failing the micro-batch and so the query.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipeline_stages._connectors.http_client import (
    HttpPolicy,
    HttpRequest,
    Outcome,
    join_url,
    parse_response,
    send_all,
)
from pipeline_stages._enrichment.operator_stats import LATENCY_MS
from pipeline_stages._stream.json_text import prefer_double

if TYPE_CHECKING:
    import pyarrow as pa

HEALTHY = "__https_healthy__"
PATH = "__https_path__"
BODY = "__https_body__"
PARAM_PREFIX = "__https_param_"
HEADER_PREFIX = "__https_header_"
RESULT = "__https_result__"
ERROR = "__https_error__"


class HttpsFailed(RuntimeError):
    """A request failed under `onError: "fail"`: the micro-batch (and the query) fails."""


@dataclass(frozen=True)
class HttpsJob:
    """One `$https` stage as the executors run it (pickled with the query)."""

    url: str
    connection_headers: Mapping[str, str]
    method: str
    static_path: str | None
    param_names: tuple[str, ...]
    header_names: tuple[str, ...]
    policy: HttpPolicy
    on_error: str
    parse_json_strings: bool

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        """Spark's `mapInArrow` function: the batches with `RESULT` and `ERROR` added."""
        import pyarrow as pa

        for batch in batches:
            columns = {
                name: batch.column(name).to_pylist()
                for name in batch.schema.names
                if name.startswith("__https_")
            }
            requests, errors = self._requests(columns, batch.num_rows)
            outcomes = send_all(requests, self.policy)
            results: list[str | None] = [None] * batch.num_rows
            latencies: list[float | None] = [None] * batch.num_rows
            for index, outcome in enumerate(outcomes):
                if outcome is not None:
                    results[index], errors[index] = self._settle(outcome)
                    latencies[index] = outcome.elapsed_ms
            yield (
                batch.append_column(RESULT, pa.array(results, pa.string()))
                .append_column(ERROR, pa.array(errors, pa.string()))
                .append_column(LATENCY_MS, pa.array(latencies, pa.float64()))
            )

    def _requests(
        self, columns: Mapping[str, list[Any]], rows: int
    ) -> tuple[list[HttpRequest | None], list[str | None]]:
        requests: list[HttpRequest | None] = [None] * rows
        errors: list[str | None] = [None] * rows
        for index in range(rows):
            if not columns[HEALTHY][index]:
                continue
            try:
                requests[index] = self._request(columns, index)
            except ValueError as exc:
                errors[index] = str(exc)
        return requests, errors

    def _request(self, columns: Mapping[str, list[Any]], index: int) -> HttpRequest:
        path = self.static_path
        if PATH in columns:
            path = _string(columns[PATH][index], "path")
        params = {
            name: _scalar(columns[f"{PARAM_PREFIX}{i}"][index], name)
            for i, name in enumerate(self.param_names)
        }
        headers = dict(self.connection_headers)
        for i, name in enumerate(self.header_names):
            headers[name] = _string(columns[f"{HEADER_PREFIX}{i}"][index], f"header {name}")
        body = columns[BODY][index] if BODY in columns else None
        if body is not None:
            headers.setdefault("content-type", "application/json")
        return HttpRequest(self.method, join_url(self.url, path), params, headers, body)

    def _settle(self, outcome: Outcome) -> tuple[str | None, str | None]:
        problem = None if outcome.ok else outcome.describe()
        value: Any = None
        if problem is None:
            try:
                value = parse_response(outcome.body, parse_json_strings=self.parse_json_strings)
            except ValueError as exc:
                problem = (
                    f"the response is not valid JSON ({exc}); response body: "
                    + (outcome.body[:1024])
                )
        if problem is None:
            return prefer_double(json.dumps(value)), None
        if self.on_error == "fail":
            raise HttpsFailed(f"$https {problem}")
        return None, (problem if self.on_error == "dlq" else None)


def _decoded(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _string(text: str | None, what: str) -> str:
    value = _decoded(text)
    if not isinstance(value, str):
        raise ValueError(f"$https {what} must evaluate to a string, got {json.dumps(value)}")
    return value


def _scalar(text: str | None, name: str) -> Any:
    value = _decoded(text)
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, str | int | float):
        raise ValueError(
            f"$https parameter {name} must evaluate to a number, string or boolean, "
            f"got {json.dumps(value)}"
        )
    return value


def names(mapping: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The keys of an optional mapping, in order."""
    return tuple(mapping or ())
