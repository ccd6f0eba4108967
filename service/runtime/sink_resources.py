"""What sink writers reach through the runner: the `local` store and `Cluster` clients.

`sluice process` and the service both build sink writers with
`pipeline_stages._connectors.sinks.dispatch.build_sink_writer`; this module supplies the
`SinkResources` they need. `Cluster` clients are opened on first use (inside a micro-batch,
so an unreachable cluster fails the batch and the query is retried, never the start call)
and shared by every run of the process (`ClusterClients`), because pymongo clients are
thread-safe, pooled and expensive to open.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pipeline_stages._base import ProblemCollector
from pipeline_stages._connectors.sinks.dispatch import build_sink_writer
from pipeline_stages._connectors.sinks.partitioned import build_partition_sink
from pipeline_stages._connectors.sinks.planning import plan_sink
from pipeline_stages._stream.context import BUILTIN_CONNECTIONS, ConnectionInfo
from service.stores import DocumentStore

if TYPE_CHECKING:
    from service.runtime.executor_stores import ExecutorSinkResources


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def executors_on_this_host(master: str) -> bool:
    """Whether every executor of `master` runs on this machine: `local[*]`, or a standalone
    master on a loopback address (whose workers are local too)."""
    if master.startswith("local"):
        return True
    if not master.startswith("spark://"):
        return False
    hosts = [urlsplit(f"spark://{part}").hostname for part in master[8:].split(",")]
    return all(host in _LOOPBACK or (host or "").startswith("127.") for host in hosts)


class ClusterClients:
    """One pymongo client (and `$merge` document store) per `Cluster` URI."""

    def __init__(self) -> None:
        self._clients: dict[str, Any] = {}
        self._documents: dict[str, DocumentStore] = {}
        self._lock = threading.Lock()

    def client(self, uri: str) -> Any:
        """The client of `uri` (opened on first use, tz-aware as the stores require)."""
        from pymongo import MongoClient

        with self._lock:
            if uri not in self._clients:
                self._clients[uri] = MongoClient(uri, tz_aware=True)
            return self._clients[uri]

    def documents(self, uri: str) -> DocumentStore:
        """The `DocumentStore` over the client of `uri`."""
        from service.stores.mongo_documents import MongoDocumentStore

        client = self.client(uri)
        with self._lock:
            if uri not in self._documents:
                self._documents[uri] = MongoDocumentStore(client)
            return self._documents[uri]

    def close(self) -> None:
        """Close every client."""
        with self._lock:
            clients, self._clients, self._documents = list(self._clients.values()), {}, {}
        for client in clients:
            client.close()


class StoreSinkResources:
    """`SinkResources` over the embedded store and the registered connections.

    Args:
        local: The `local` connection's document store, or a function opening it (so a
            pipeline without a `local` sink never opens it).
        connections: The registered connections (secrets included), by name.
        clients: The shared `Cluster` clients.
    """

    def __init__(
        self,
        *,
        local: DocumentStore | Callable[[], DocumentStore],
        connections: Mapping[str, Any],
        clients: ClusterClients,
    ) -> None:
        self._local = local
        self._connections = connections
        self._clients = clients

    def connection(self, name: str) -> ConnectionInfo | None:
        """A registered connection, built-ins too."""
        found = self._connections.get(name)
        if found is not None:
            return ConnectionInfo(found.name, found.type, dict(found.config))
        return BUILTIN_CONNECTIONS.get(name)

    def documents(self, connection: str) -> DocumentStore:
        """The document store of `local` or of a `Cluster` connection."""
        info = self.connection(connection)
        if info is not None and info.type == "Local":
            if callable(self._local) and not hasattr(self._local, "merge"):
                self._local = self._local()
            return self._local  # type: ignore[return-value]
        return self._clients.documents(self._uri(connection, info))

    def mongo_client(self, connection: str) -> Any:
        """The pymongo client of a `Cluster` connection."""
        return self._clients.client(self._uri(connection, self.connection(connection)))

    def for_executors(self, connection: str, *, on_this_host: bool) -> ExecutorSinkResources | None:
        """Picklable resources reaching `connection` from the executors, or None when they
        cannot: `local` is a SQLite file only executors on this machine open (and a
        MongoDB-backed `local` is reached through the service's own client)."""
        from service.runtime.executor_stores import ExecutorSinkResources  # pymongo, lazily

        info = self.connection(connection)
        if info is None:
            return None
        local_path = None
        if info.type == "Local":
            path = getattr(self.documents(connection), "database_path", None)
            if not on_this_host or path is None:
                return None
            local_path = str(path)
        return ExecutorSinkResources(connections={connection: info}, local_path=local_path)

    @staticmethod
    def _uri(name: str, info: ConnectionInfo | None) -> str:
        uri = info.config.get("uri") if info is not None and info.type == "Cluster" else None
        if not isinstance(uri, str):
            raise LookupError(f"connection {name!r} is not a Cluster connection with a uri")
        return uri


def build_run_partition_sink(
    parsed: Any,
    resources: StoreSinkResources,
    *,
    processor: str,
    run_tag: str,
    executors_on_this_host: bool = True,
) -> Any | None:
    """The `PartitionSink` of a parsed pipeline (None without a sink): written on the
    executors when they reach its target (`StoreSinkResources.for_executors`), else in the
    driver with the same bulk writers."""
    if parsed.sink is None:
        return None
    plan = plan_sink(parsed.sink, connection_of=resources.connection, problems=ProblemCollector())
    if plan is None:
        return None
    executors = resources.for_executors(plan.connection, on_this_host=executors_on_this_host)
    return build_partition_sink(
        plan, resources, executors=executors, processor=processor, run_tag=run_tag
    )


def build_run_sink(
    parsed: Any, resources: StoreSinkResources, *, processor: str, run_tag: str
) -> Any | None:
    """The sink writer of a parsed pipeline, or None without a sink.

    A sink whose plan has problems gets no writer here: compiling the pipeline reports the
    same problems (`PipelineInvalid`) before any batch runs.
    """
    if parsed.sink is None:
        return None
    plan = plan_sink(parsed.sink, connection_of=resources.connection, problems=ProblemCollector())
    if plan is None:
        return None
    return build_sink_writer(plan, resources, processor=processor, run_tag=run_tag)
