"""A small typed client of the Sluice REST API over an injectable `httpx.Client`.

Tests pass FastAPI's `TestClient(app)` (an `httpx.Client`) or one built on
`httpx.MockTransport`; the CLI builds a real one. Where the service is and which key to use
come from `resolve_target`: flags, then `SLUICE_URL` / `SLUICE_API_KEY`, then a config file
(`--config`, `SLUICE_CONFIG` or `~/.config/sluice/config.toml`, keys `url`, `api_key`,
`data_dir`), then the key the service generated in its data directory (`SLUICE_DATA_DIR`,
default `~/.sluice`) and `http://127.0.0.1:8420`.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from service.config.api_key_file import read_key_file

DEFAULT_URL = "http://127.0.0.1:8420"
API = "/api/v1"


class ApiError(Exception):
    """An error answer of the service (its `ErrorBody`), or no answer at all.

    Attributes:
        status: HTTP status (0 when the service could not be reached).
        body: The error body (`error`, `errorCode`, `detail`, `problems`, `warnings`).
    """

    def __init__(self, status: int, body: Mapping[str, Any]) -> None:
        self.status = status
        self.body = dict(body)
        super().__init__(f"{status} {self.code}: {self.detail}")

    @property
    def code(self) -> str:
        """The service's `errorCode`."""
        return str(self.body.get("errorCode", "ERROR"))

    @property
    def detail(self) -> str:
        """The service's `detail`."""
        return str(self.body.get("detail", ""))

    @property
    def problems(self) -> list[dict[str, str]]:
        """The `{code, path, message}` problems."""
        return list(self.body.get("problems") or [])


@dataclass(frozen=True)
class Target:
    """Where the service is and how to authenticate."""

    url: str
    api_key: str | None


def _config_file(path: str | None) -> dict[str, Any]:
    candidate = path or os.environ.get("SLUICE_CONFIG")
    file = Path(candidate) if candidate else Path.home() / ".config" / "sluice" / "config.toml"
    try:
        with open(file, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        if candidate:
            raise ValueError(f"config file {file} does not exist") from None
        return {}
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ValueError(f"cannot read config file {file}: {error}") from None


def resolve_target(url: str | None, api_key: str | None, config: str | None = None) -> Target:
    """The service URL and API key (see the module docstring for the order).

    Raises:
        ValueError: When an explicitly named config file cannot be read.
    """
    settings = _config_file(config)
    resolved_url = url or os.environ.get("SLUICE_URL") or settings.get("url") or DEFAULT_URL
    key = api_key or os.environ.get("SLUICE_API_KEY") or settings.get("api_key")
    if not key:
        data_dir = os.environ.get("SLUICE_DATA_DIR") or settings.get("data_dir")
        key = read_key_file(Path(data_dir).expanduser() if data_dir else Path.home() / ".sluice")
    return Target(str(resolved_url).rstrip("/"), key)


def http_client(target: Target, *, timeout: float = 300.0) -> httpx.Client:
    """An `httpx.Client` for the target (generous timeout: a first start waits for Spark)."""
    headers = {"Authorization": f"Bearer {target.api_key}"} if target.api_key else {}
    return httpx.Client(base_url=target.url, headers=headers, timeout=timeout)


def _query(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


class SluiceClient:
    """Calls the API; every method returns the decoded JSON body or raises `ApiError`."""

    def __init__(self, http: httpx.Client) -> None:
        self.http = http

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One call; 4xx/5xx become `ApiError`, unreachable services `ApiError(0, ...)`."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            base = getattr(self.http, "base_url", "")
            detail = (
                f"cannot reach the Sluice service at {base}: {error} (is `sluice serve` running?)"
            )
            raise ApiError(0, {"errorCode": "UNREACHABLE", "detail": detail}) from None
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text[:500]}
            if not isinstance(body, dict):
                body = {"detail": str(body)[:500]}
            raise ApiError(response.status_code, body)
        if response.status_code == 204 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    # ------------------------------------------------------------------ processors

    def create_processor(
        self, name: str, pipeline: list[Any], *, dlq: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """`POST /processors`."""
        options = {"dlq": dict(dlq)} if dlq else {}
        body = {"name": name, "pipeline": pipeline, "options": options}
        return self.request("POST", f"{API}/processors", json=body)

    def list_processors(self, *, page: int = 1, per_page: int = 100) -> dict[str, Any]:
        """`GET /processors`."""
        params = {"pageNum": page, "itemsPerPage": per_page}
        return self.request("GET", f"{API}/processors", params=params)

    def get_processor(self, name: str) -> dict[str, Any]:
        """`GET /processors/{name}`."""
        return self.request("GET", f"{API}/processors/{name}")

    def modify_processor(self, name: str, changes: Mapping[str, Any]) -> dict[str, Any]:
        """`PATCH /processors/{name}` with `{name?, pipeline?, options?}`."""
        return self.request("PATCH", f"{API}/processors/{name}", json=dict(changes))

    def start_processor(self, name: str, *, resume: bool = True) -> dict[str, Any]:
        """`POST /processors/{name}:start`."""
        body = None if resume else {"resumeFromCheckpoint": False}
        return self.request("POST", f"{API}/processors/{name}:start", json=body)

    def stop_processor(self, name: str) -> dict[str, Any]:
        """`POST /processors/{name}:stop`."""
        return self.request("POST", f"{API}/processors/{name}:stop")

    def drop_processor(self, name: str) -> None:
        """`DELETE /processors/{name}`."""
        self.request("DELETE", f"{API}/processors/{name}")

    def stats(self, name: str, *, verbose: bool = False, scale: int = 1) -> dict[str, Any]:
        """`GET /processors/{name}/stats`."""
        params = {"verbose": str(verbose).lower(), "scale": scale}
        return self.request("GET", f"{API}/processors/{name}/stats", params=params)

    def sample(self, name: str, *, limit: int = 20, after: str | None = None) -> dict[str, Any]:
        """`GET /processors/{name}/sample`."""
        params = _query({"limit": limit, "after": after})
        return self.request("GET", f"{API}/processors/{name}/sample", params=params)

    # ------------------------------------------------------------------ DLQ

    def dlq(self, name: str, **filters: Any) -> dict[str, Any]:
        """`GET /processors/{name}/dlq` (filters: reason, operatorName, from, to, filter,
        limit, skip, sort)."""
        return self.request("GET", f"{API}/processors/{name}/dlq", params=_query(filters))

    def purge_dlq(self, name: str, **filters: Any) -> dict[str, Any]:
        """`DELETE /processors/{name}/dlq`."""
        return self.request("DELETE", f"{API}/processors/{name}/dlq", params=_query(filters))

    def replay_dlq(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST /processors/{name}/dlq:replay`."""
        return self.request("POST", f"{API}/processors/{name}/dlq:replay", json=dict(body))

    # ------------------------------------------------------------------ connections, ingest

    def create_connection(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST /connections`."""
        return self.request("POST", f"{API}/connections", json=dict(body))

    def test_connection(self, name: str, *, timeout: float) -> dict[str, Any]:
        """`POST /connections/{name}:test`."""
        params = {"timeout": timeout}
        return self.request("POST", f"{API}/connections/{name}:test", params=params)

    def list_connections(self, *, page: int = 1, per_page: int = 100) -> dict[str, Any]:
        """`GET /connections`."""
        params = {"pageNum": page, "itemsPerPage": per_page}
        return self.request("GET", f"{API}/connections", params=params)

    def drop_connection(self, name: str) -> None:
        """`DELETE /connections/{name}`."""
        self.request("DELETE", f"{API}/connections/{name}")

    def ingest(
        self, connection: str, body: bytes, *, content_type: str = "application/x-ndjson"
    ) -> dict[str, Any]:
        """`POST /ingest/{connection}`."""
        headers = {"Content-Type": content_type}
        return self.request("POST", f"{API}/ingest/{connection}", content=body, headers=headers)

    def health(self) -> dict[str, Any]:
        """`GET /healthz`."""
        return self.request("GET", "/healthz")
