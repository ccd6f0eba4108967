"""From a parsed `$merge` / `$emit` spec and the connection registry to a sink plan (no Spark).

The connection type decides what a sink can do, so these checks run at compile time (and in
the service's definition checks, which know connection types only): problems are collected
with `{code, path, message}` and JSON-pointer paths, never raised one at a time.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from pipeline_stages._base import ProblemCode, ProblemCollector, join_path
from pipeline_stages._connectors.file_paths import path_problem
from pipeline_stages._connectors.sinks.https_writer import plan_https
from pipeline_stages._connectors.sinks.kafka import kafka_names
from pipeline_stages._connectors.sinks.plans import (
    RESERVED_LOCAL_DB,
    CollectionEmitPlan,
    FileEmitPlan,
    KafkaEmitPlan,
    MergePlan,
    Name,
    SinkPlan,
    namespace_problem,
)
from pipeline_stages._stream.context import ConnectionInfo

ConnectionOf = Callable[[str], ConnectionInfo | None]

#: Connection types a `$merge` can write to (`Local` is the built-in `local`).
MERGE_TYPES = ("Local", "Cluster")
KAFKA_WRITER_MODULE = "pipeline_stages._connectors.sinks.kafka"


#: The client library the Kafka writer produces with.
KAFKA_CLIENT_MODULE = "confluent_kafka"


def kafka_writer_available() -> bool:
    """Whether this build has the Kafka connector's `$emit` writer and its client library
    (without it a processor would start and fail at its first batch)."""
    return all(_importable(module) for module in (KAFKA_WRITER_MODULE, KAFKA_CLIENT_MODULE))


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing, or a None entry in sys.modules
        return False


def _connection(
    name: str, connection_of: ConnectionOf, path: str, problems: ProblemCollector
) -> ConnectionInfo | None:
    connection = connection_of(name)
    if connection is None:
        problems.error(
            path, ProblemCode.UNKNOWN_CONNECTION, f"no connection named {name!r} is registered"
        )
    return connection


def plan_merge(
    spec: Any, *, connection_of: ConnectionOf, path: str, problems: ProblemCollector
) -> MergePlan | None:
    """The `$merge` plan, or None (with problems recorded) when it cannot run."""
    body = join_path(path, "$merge")
    name = spec.into.connection_name
    connection = _connection(
        name, connection_of, join_path(body, "into", "connectionName"), problems
    )
    ok = connection is not None
    if connection is not None and connection.type not in MERGE_TYPES:
        problems.error(
            join_path(body, "into", "connectionName"),
            ProblemCode.INVALID_VALUE,
            f"$merge writes to a Cluster connection or 'local', got a {connection.type} "
            "connection (use $emit for Kafka and File connections)",
        )
        ok = False
    if not isinstance(spec.when_matched, str):
        shape = "an update pipeline" if isinstance(spec.when_matched, list) else "an expression"
        problems.error(
            join_path(body, "whenMatched"),
            ProblemCode.UNSUPPORTED_OPTION,
            f"whenMatched as {shape} is not supported by Sluice's stores yet; use replace, "
            "keepExisting, merge or delete",
        )
        ok = False
    if not isinstance(spec.when_not_matched, str):
        problems.error(
            join_path(body, "whenNotMatched"),
            ProblemCode.UNSUPPORTED_OPTION,
            "whenNotMatched as an expression is not supported by Sluice's stores yet; use "
            "insert or discard",
        )
        ok = False
    if not ok or connection is None:
        return None
    if connection.type == "Local" and spec.into.db == RESERVED_LOCAL_DB:
        problems.error(
            join_path(body, "into", "db"),
            ProblemCode.INVALID_VALUE,
            f"database {RESERVED_LOCAL_DB!r} of 'local' is reserved for Sluice; pick another",
        )
        return None
    on = spec.on if spec.on is not None else "_id"
    db, coll = Name.of(spec.into.db, "into", "db"), Name.of(spec.into.coll, "into", "coll")
    if not _namespace_ok(db, coll, body, problems):
        return None
    return MergePlan(
        connection=name,
        connection_type=connection.type,
        db=db,
        coll=coll,
        on=(on,) if isinstance(on, str) else tuple(on),
        when_matched=spec.when_matched,
        when_not_matched=spec.when_not_matched,
        parallelism=spec.parallelism,
    )


def plan_emit(
    spec: Any, *, connection_of: ConnectionOf, path: str, problems: ProblemCollector
) -> SinkPlan | None:
    """The `$emit` plan for the connection's type, or None (with problems recorded)."""
    body = join_path(path, "$emit")
    name_path = join_path(body, "connectionName")
    connection = _connection(spec.connection_name, connection_of, name_path, problems)
    if connection is None:
        return None
    kind = connection.type
    wanted = {"Kafka": "topic", "Cluster": "db", "Local": "db", "File": "path"}.get(kind)
    if wanted is None:
        problems.error(
            name_path,
            ProblemCode.INVALID_VALUE,
            f"$emit writes to Kafka, Cluster, File connections or 'local', got a {kind} connection",
        )
        return None
    given = "topic" if spec.topic is not None else "path" if spec.path is not None else "db"
    if given != wanted:
        problems.error(
            join_path(body, given),
            ProblemCode.INVALID_COMBINATION,
            f"a {kind} connection takes {_form(wanted)} in $emit, not {given}",
        )
        return None
    if kind == "File":
        return _file_plan(spec, connection, body, problems)
    if kind == "Kafka":
        return _kafka_plan(spec, connection, name_path, problems)
    timeseries = (
        spec.timeseries.model_dump(by_alias=True, exclude_none=True)
        if spec.timeseries is not None
        else None
    )
    db, coll = Name.of(spec.db, "db"), Name.of(spec.coll, "coll")
    if not _namespace_ok(db, coll, body, problems):
        return None
    return CollectionEmitPlan(
        connection=connection.name,
        connection_type=kind,
        db=db,
        coll=coll,
        timeseries=timeseries,
    )


def _namespace_ok(db: Name, coll: Name, body: str, problems: ProblemCollector) -> bool:
    """Check the literal names with the rule computed ones get per document
    (`namespace_problem`); False (problem recorded) when one is refused."""
    # A computed name stands in as a valid one, so each literal is checked on its own.
    found = namespace_problem(db.literal or "db", coll.literal or "coll")
    if found is None:
        return True
    bad_db = db.literal is not None and namespace_problem(db.literal, "coll") is not None
    where = db if bad_db or coll.literal is None else coll
    problems.error(join_path(body, *where.pointer), ProblemCode.INVALID_VALUE, found)
    return False


def _form(field: str) -> str:
    return {"topic": "a topic", "db": "db and coll", "path": "a path"}[field]


def _file_plan(
    spec: Any, connection: ConnectionInfo, body: str, problems: ProblemCollector
) -> FileEmitPlan | None:
    name = Name.of(spec.path, "path")
    if name.literal is not None and (problem := path_problem(name.literal)) is not None:
        problems.error(join_path(body, "path"), ProblemCode.INVALID_VALUE, problem)
        return None
    return FileEmitPlan(connection=connection.name, path=name)


def _kafka_plan(
    spec: Any, connection: ConnectionInfo, name_path: str, problems: ProblemCollector
) -> KafkaEmitPlan | None:
    if not kafka_writer_available():
        problems.error(
            name_path,
            ProblemCode.UNSUPPORTED_OPTION,
            "writing Kafka needs confluent-kafka (pip install 'sluice[kafka]'), which is not "
            "installed; use a File or Cluster connection, or install it",
        )
        return None

    options = spec.model_dump(by_alias=True, exclude_none=True)
    return KafkaEmitPlan(
        connection=connection.name,
        topic=Name.of(spec.topic, "topic"),
        options=options,
        computed=kafka_names(options),
    )


def plan_sink(stage: Any, *, connection_of: ConnectionOf, problems: ProblemCollector) -> Any:
    """The plan of a parsed sink stage (`ParsedStage` of `$merge` or `$emit`), or None."""
    if stage.key == "$https":
        return plan_https(
            stage.spec, connection_of=connection_of, path=stage.path, problems=problems
        )
    plan = plan_merge if stage.key == "$merge" else plan_emit
    return plan(stage.spec, connection_of=connection_of, path=stage.path, problems=problems)
