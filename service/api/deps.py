"""Dependencies as `Annotated` aliases (`ManagerDep`, `SettingsDep`, ...) and the API-key check.

They are `async` because they do no I/O: FastAPI runs sync dependencies in its thread pool,
which would cost every request a thread hop for nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.convertors import Convertor, register_url_convertor

from service.auth import ApiKeyChecker
from service.config.settings import Settings
from service.manager.connections import ConnectionRegistry
from service.manager.ephemeral import EphemeralRuns
from service.manager.ingest import IngestService
from service.manager.processors import ProcessorManager
from service.manager.replay import DlqReplayer
from service.schemas.processors import NAME_PATTERN
from service.stores import Stores


@dataclass(frozen=True)
class Services:
    """Everything the routes use, built once per app by `create_app`."""

    settings: Settings
    stores: Stores
    manager: ProcessorManager
    connections: ConnectionRegistry
    ingest: IngestService
    auth: ApiKeyChecker
    replayer: DlqReplayer
    ephemeral: EphemeralRuns


async def get_services(request: Request) -> Services:
    """The app's services."""
    services: Services = request.app.state.services
    return services


async def get_manager(request: Request) -> ProcessorManager:
    """The processor manager."""
    return (await get_services(request)).manager


async def get_connections(request: Request) -> ConnectionRegistry:
    """The connection registry."""
    return (await get_services(request)).connections


async def get_ingest(request: Request) -> IngestService:
    """The ingest service."""
    return (await get_services(request)).ingest


async def get_replayer(request: Request) -> DlqReplayer:
    """The DLQ replayer."""
    return (await get_services(request)).replayer


async def get_ephemeral(request: Request) -> EphemeralRuns:
    """The ephemeral processors."""
    return (await get_services(request)).ephemeral


async def get_settings(request: Request) -> Settings:
    """The settings."""
    return (await get_services(request)).settings


ManagerDep = Annotated[ProcessorManager, Depends(get_manager)]
ConnectionsDep = Annotated[ConnectionRegistry, Depends(get_connections)]
IngestDep = Annotated[IngestService, Depends(get_ingest)]
ReplayerDep = Annotated[DlqReplayer, Depends(get_replayer)]
EphemeralDep = Annotated[EphemeralRuns, Depends(get_ephemeral)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ServicesDep = Annotated[Services, Depends(get_services)]


class _NameSegment(Convertor[str]):
    """A path segment without `:`: names never hold one, so `p1:start` is the action route of
    `p1` and `PATCH /processors/p1:start` is a 405 of that route, not a bad name for
    `PATCH /processors/{name}`."""

    regex = "[^/:]+"

    def convert(self, value: str) -> str:
        """The segment as given."""
        return value

    def to_string(self, value: str) -> str:
        """The segment as given."""
        return value


register_url_convertor("segment", _NameSegment())

#: The path of a resource by name (`/{name}` without the action routes' `name:action`).
BY_NAME = "/{name:segment}"

ProcessorName = Annotated[
    str, Path(pattern=NAME_PATTERN, description="Processor name ([A-Za-z0-9_-]{1,64}).")
]
ConnectionName = Annotated[
    str, Path(pattern=NAME_PATTERN, description="Connection name ([A-Za-z0-9_-]{1,64}).")
]

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer <key>`.")


async def require_api_key(
    request: Request,
    _credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Reject the request (401) unless it carries an accepted API key."""
    (await get_services(request)).auth.check(request.headers.get("authorization"))
