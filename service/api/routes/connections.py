"""`/api/v1/connections`: the connection registry (secrets are write-only)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from service.api import present
from service.api.deps import ConnectionName, ConnectionsDep, ManagerDep
from service.errors import ConnectionTypeMismatch
from service.manager.connection_probe import MAX_TIMEOUT_S, probe_kafka
from service.schemas.connections import (
    ConnectionCreate,
    ConnectionProbe,
    ConnectionPublic,
    ConnectionsPublic,
)

router = APIRouter(prefix="/connections", tags=["connections"])


@router.post("", status_code=201, response_model=ConnectionPublic, responses=present.errors(409))
def create_connection(body: ConnectionCreate, connections: ConnectionsDep) -> dict[str, Any]:
    """Register a Kafka, Cluster, HttpIngest, Sample or File connection."""
    return connections.create(body)


@router.get("", response_model=ConnectionsPublic, responses=present.errors())
def list_connections(
    connections: ConnectionsDep,
    itemsPerPage: Annotated[int, Query(ge=1, le=500)] = 100,  # noqa: N803 - Atlas's name
    pageNum: Annotated[int, Query(ge=1, le=1_000_000)] = 1,  # noqa: N803 - Atlas's name
) -> dict[str, Any]:
    """A page of connections, built-in ones first, without secrets."""
    results, total = connections.list(offset=(pageNum - 1) * itemsPerPage, limit=itemsPerPage)
    return {"results": results, "totalCount": total}


@router.get("/{name}", response_model=ConnectionPublic, responses=present.errors(404))
def get_connection(name: ConnectionName, connections: ConnectionsDep) -> dict[str, Any]:
    """One connection, without secrets."""
    return connections.get(name)


@router.delete(
    "/{name}", status_code=204, response_class=Response, responses=present.errors(404, 409)
)
def delete_connection(
    name: ConnectionName, connections: ConnectionsDep, manager: ManagerDep
) -> Response:
    """Delete a connection no processor uses (built-in ones cannot be deleted)."""
    connections.drop(name, users=manager.users_of)
    return Response(status_code=204)


@router.post("/{name}:test", response_model=ConnectionProbe, responses=present.errors(404, 409))
def test_connection(
    name: ConnectionName,
    connections: ConnectionsDep,
    timeout: Annotated[float, Query(ge=1, le=MAX_TIMEOUT_S, description="Seconds.")] = 10,
) -> dict[str, Any]:
    """Check a Kafka connection: the brokers answer within `timeout` and list their topics
    (200 with `ok: false` and what to fix when they do not)."""
    connections.get(name)  # 404 for an unknown name
    record = connections.record(name)
    if record is None or record.type.value != "Kafka":
        raise ConnectionTypeMismatch(f"connection {name!r} is not a Kafka connection")
    return probe_kafka(dict(record.config), timeout_s=timeout)
