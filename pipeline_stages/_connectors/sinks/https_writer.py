"""`$https` as the last stage: one request per output, the output's id as `Idempotency-Key`.

The plan (`HttpsSinkPlan`, built by `plan_https`) keeps what the writer needs: the connection
name and the stage's method, path, parameters, headers, `onError` and HTTP policy. A `path`,
parameter or header given as an expression is evaluated upstream in Spark, like the other
sinks' computed target names (`sinks.targets`: `names()` lists them), and reaches the writer
in `Output.target`. The request body is the output document (Extended JSON) for POST, PUT and
PATCH; a `payload` pipeline is refused here (`unsupported_option`) for now.

Delivery is at least once: a micro-batch replayed after a crash sends its outputs again with
the same `Idempotency-Key` (`ids.effective_keys`: processor, source position or window and
group), so an API that deduplicates on the key sees each output once. Requests run
concurrently, bounded (`http_client`); a failed one goes to the DLQ under `onError: "dlq"`
(status and truncated body in the reason), is dropped under `ignore`, and fails the batch
(so the query) under `fail`.

Each write leaves what it did in `requests` (documents received, requests answered 2xx,
each request's latency): the sink's operator stats, which the partition hands to the driver
with its summary (`_engine.partitions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._connectors.http_client import (
    HttpPolicy,
    HttpRequest,
    join_url,
    send_all,
)
from pipeline_stages._connectors.sinks.ids import (
    effective_keys,
    sink_dlq_record,
    write_error_reason,
)
from pipeline_stages._connectors.sinks.plans import Name, TargetError, resolve_name
from pipeline_stages._stream.batch import BatchResult, SinkRequests
from pipeline_stages._stream.context import ConnectionInfo

OPERATOR = "HttpsOperator"
IDEMPOTENCY_HEADER = "Idempotency-Key"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


class HttpsSinkFailed(RuntimeError):
    """A request failed under `onError: "fail"`: the micro-batch fails, and the query."""


@dataclass(frozen=True)
class HttpsSinkPlan:
    """`$https` as the sink: its connection and request shape (no secrets)."""

    connection: str
    method: str
    path: Name | None
    parameters: Mapping[str, Name] = field(default_factory=dict)
    headers: Mapping[str, Name] = field(default_factory=dict)
    on_error: str = "dlq"
    policy: HttpPolicy = HttpPolicy()
    operator: str = OPERATOR

    def names(self) -> dict[str, Name]:
        """Every name of the request, keyed as they travel in `Output.target`."""
        found = {"path": self.path} if self.path is not None else {}
        found.update({f"parameters.{k}": v for k, v in self.parameters.items()})
        found.update({f"headers.{k}": v for k, v in self.headers.items()})
        return found


def plan_https(
    spec: Any, *, connection_of: Any, path: str, problems: ProblemCollector
) -> HttpsSinkPlan | None:
    """The sink plan of a final `$https` (`HttpsSpec`), or None with problems recorded."""
    stage = join_path(path, "$https")
    if not _connection_ok(spec.connection_name, connection_of, stage, problems):
        return None
    if spec.payload is not None:
        problems.error(
            join_path(stage, "payload"),
            ProblemCode.UNSUPPORTED_OPTION,
            "payload is not supported when $https is the last stage yet: shape the document "
            "with the stages before it",
        )
        return None
    config = spec.config
    return HttpsSinkPlan(
        connection=spec.connection_name,
        method=spec.method,
        path=None if spec.path is None else Name.of(spec.path, "path"),
        parameters={k: _name(v, "parameters", k) for k, v in (spec.parameters or {}).items()},
        headers={k: _name(v, "headers", k) for k, v in (spec.headers or {}).items()},
        on_error=spec.on_error,
        policy=HttpPolicy(
            connect_timeout_s=config.connection_timeout_sec,
            request_timeout_s=config.request_timeout_sec,
            max_retries=config.max_retries,
            backoff_ms=config.retry_backoff_ms,
        ),
    )


def _connection_ok(name: str, connection_of: Any, stage: str, problems: ProblemCollector) -> bool:
    info = connection_of(name)
    where = join_path(stage, "connectionName")
    if info is None:
        problems.error(where, ProblemCode.UNKNOWN_CONNECTION, f"Unknown connection '{name}'")
        return False
    if info.type != "Https":
        problems.error(
            where,
            ProblemCode.INVALID_VALUE,
            f"Connection '{name}' is a {info.type} connection; $https needs an Https connection",
        )
        return False
    return True


def _name(value: Any, *pointer: str) -> Name:
    """A parameter or header value as a sink name (literal scalars as their query text)."""
    if isinstance(value, bool):
        return Name(literal="true" if value else "false", pointer=pointer)
    if isinstance(value, int | float):
        return Name(literal=str(value), pointer=pointer)
    return Name.of(value, *pointer)


class HttpsSinkWriter:
    """`SinkWriter` of a final `$https`: one request per output (see the module docstring)."""

    def __init__(
        self, plan: HttpsSinkPlan, connection: ConnectionInfo | None, *, processor: str
    ) -> None:
        config = connection.config if connection is not None else {}
        if not isinstance(config.get("url"), str):
            raise ValueError(f"Https connection {plan.connection!r} has no url")
        self.plan = plan
        self._url = str(config["url"])
        self._headers = {str(k): str(v) for k, v in (config.get("headers") or {}).items()}
        self._processor = processor
        #: What the last `write` did (its operator's stats); None before any.
        self.requests: SinkRequests | None = None

    def write(self, batch: BatchResult) -> list[dict[str, Any]]:
        """Send the batch's outputs; return DLQ records for those not delivered."""
        keys = effective_keys(batch.outputs)
        requests: list[HttpRequest | None] = []
        failures: dict[int, str] = {}
        for index, (output, key) in enumerate(zip(batch.outputs, keys, strict=True)):
            try:
                requests.append(self._request(output.doc_json, output.target, key))
            except TargetError as exc:
                requests.append(None)
                failures[index] = str(exc)
        latencies: list[float] = []
        acknowledged = 0
        for index, outcome in enumerate(send_all(requests, self.plan.policy)):
            if outcome is None:
                continue
            latencies.append(outcome.elapsed_ms)
            if outcome.ok:
                acknowledged += 1
            else:
                failures[index] = outcome.describe()
        self.requests = SinkRequests(
            self.plan.operator, len(batch.outputs), acknowledged, tuple(latencies)
        )
        if failures and self.plan.on_error == "fail":
            first = failures[min(failures)]
            raise HttpsSinkFailed(f"$https sink {first}")
        if self.plan.on_error == "ignore":
            return []
        now = datetime.now(UTC)
        return [
            sink_dlq_record(
                batch.outputs[index].doc_json,
                key=keys[index],
                reason=write_error_reason(OPERATOR, message),
                operator=OPERATOR,
                processor=self._processor,
                now=now,
            )
            for index, message in sorted(failures.items())
        ]

    def _request(self, doc_json: str, target: Mapping[str, Any] | None, key: str) -> HttpRequest:
        plan = self.plan
        path = None if plan.path is None else resolve_name(plan.path, "path", target)
        params = {k: _value(n, "parameters", k, target) for k, n in plan.parameters.items()}
        headers = {**self._headers, IDEMPOTENCY_HEADER: key}
        headers.update({k: _value(n, "headers", k, target) for k, n in plan.headers.items()})
        body = doc_json if plan.method in _WITH_BODY else None
        if body is not None:
            headers.setdefault("content-type", "application/json")
        return HttpRequest(plan.method, join_url(self._url, path), params, headers, body)


def _value(name: Name, group: str, key: str, target: Mapping[str, Any] | None) -> str:
    if name.literal is not None:
        return name.literal
    computed = ((target or {}).get(group) or {}).get(key)
    if isinstance(computed, bool):
        return "true" if computed else "false"
    if not isinstance(computed, str | int | float):
        raise TargetError(f"$https {group} {key} must evaluate to a string, number or boolean")
    return str(computed)
