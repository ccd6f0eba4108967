"""Sink plans: what `$merge` and `$emit` compile to (pure data: no Spark, no store handles).

A plan names its connection (never its secrets: writers look the connection up when they
are built) and its targets. A target name (`db`, `coll`, `path`, `topic`) is a `Name`:
either a literal string, or an MQL expression evaluated per document upstream, in Spark
(`sinks.targets`), whose result reaches the writer with the document (`Output.target`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline_stages._stream.batch import SINK_TARGET_META

#: The key under which computed target names travel in the envelope's `meta` column
#: (`sinks.targets`); never part of an emitted document.
TARGET_META = SINK_TARGET_META

#: The `local` database holding Sluice's own collections (sample buffers): no sink writes it.
RESERVED_LOCAL_DB = "sluice"

#: Characters a database name cannot hold (MongoDB's rule, which the stores apply too).
_BAD_DB_CHARS = frozenset('/\\. "$\0')
#: Characters a collection name cannot hold: MongoDB's `$` and NUL, and the path separators,
#: which Sluice refuses so a name stays one file name wherever it is exported (`a/../b`).
_BAD_COLL_CHARS = frozenset("$\0/\\")
#: MongoDB's limit on `<db>.<coll>` in bytes.
MAX_NAMESPACE_BYTES = 255


def namespace_problem(db: str, coll: str) -> str | None:
    """Why `db`.`coll` cannot be a sink's target collection, or None.

    One rule for literal names (checked when the pipeline is compiled) and names computed per
    document (checked by the writer, which sends the document to the DLQ).
    """
    for kind, name, bad, shown in (
        ("database", db, _BAD_DB_CHARS, '/ \\ . space " $ or NUL'),
        ("collection", coll, _BAD_COLL_CHARS, "$ / \\ or NUL"),
    ):
        if not name:
            return f"the {kind} name is empty"
        found = next((c for c in name if c in bad), None)
        if found is not None:
            return f"invalid {kind} name {name!r}: it holds {found!r} (no {shown} allowed)"
    if len(db.encode()) > 63:
        return f"invalid database name {db!r}: longer than 63 bytes"
    if coll.startswith("system."):
        return f"invalid collection name {coll!r}: 'system.' names are reserved"
    if len(f"{db}.{coll}".encode()) > MAX_NAMESPACE_BYTES:
        return f"the namespace {db}.{coll[:20]}... is longer than {MAX_NAMESPACE_BYTES} bytes"
    return None


@dataclass(frozen=True)
class Name:
    """A target name: a literal, or an expression (a `$field` path or an operator object).

    Attributes:
        literal: The name when it is the same for every document, else None.
        expression: The raw MQL expression when the name is computed per document.
        pointer: JSON-pointer tokens of the option below the stage key (`("into", "db")`).
    """

    literal: str | None
    expression: Any = field(default=None, hash=False, compare=False)
    pointer: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: Any, *pointer: str) -> Name:
        """A literal for a plain string, an expression for `$...` strings and objects."""
        if isinstance(value, str) and not value.startswith("$"):
            return cls(literal=value, pointer=pointer)
        return cls(literal=None, expression=value, pointer=pointer)

    @property
    def computed(self) -> bool:
        """Whether the name is evaluated per document."""
        return self.literal is None


class TargetError(Exception):
    """A per-document target name that is not a usable string (the document goes to the DLQ)."""


def resolve_name(name: Name, key: str, target: Mapping[str, Any] | None) -> str:
    """The name for one document: the literal, or the value computed upstream under `key`.

    Raises:
        TargetError: When the computed value is missing, not a string or empty.
    """
    if name.literal is not None:
        return name.literal
    value = (target or {}).get(key)
    if not isinstance(value, str) or not value:
        shown = "missing" if value is None else repr(value)
        raise TargetError(
            f"{'.'.join(name.pointer) or key} must evaluate to a non-empty string, got {shown}"
        )
    return value


@dataclass(frozen=True)
class MergePlan:
    """`$merge` into a `local` (SQLite) or `Cluster` (MongoDB) collection.

    Attributes:
        connection: The connection name.
        connection_type: `Local` or `Cluster`.
        db: Target database.
        coll: Target collection.
        on: The match fields (`("_id",)` by default).
        when_matched: `replace`, `keepExisting`, `merge` or `delete`.
        when_not_matched: `insert` or `discard`.
        parallelism: Accepted for Atlas compatibility; writes are batched per micro-batch.
    """

    connection: str
    connection_type: str
    db: Name
    coll: Name
    on: tuple[str, ...] = ("_id",)
    when_matched: str = "merge"
    when_not_matched: str = "insert"
    parallelism: int = 1
    operator: str = "MergeOperator"

    def names(self) -> dict[str, Name]:
        """Every target name, by the key it travels under."""
        return {"db": self.db, "coll": self.coll}

    @property
    def assigns_ids(self) -> bool:
        """Whether documents without `_id` get the deterministic one (`on` is `_id`)."""
        return self.on == ("_id",)


@dataclass(frozen=True)
class FileEmitPlan:
    """`$emit` to a File connection: one JSON-lines file per micro-batch under `path`."""

    connection: str
    path: Name
    operator: str = "EmitOperator"

    def names(self) -> dict[str, Name]:
        """Every target name, by the key it travels under."""
        return {"path": self.path}


@dataclass(frozen=True)
class CollectionEmitPlan:
    """`$emit` to a collection: a time-series collection on a `Cluster`, a plain one on `local`.

    Attributes:
        timeseries: The `timeseries` options as Atlas spells them (None without them).
    """

    connection: str
    connection_type: str
    db: Name
    coll: Name
    timeseries: Mapping[str, Any] | None = field(default=None, hash=False)
    operator: str = "EmitOperator"

    def names(self) -> dict[str, Name]:
        """Every target name, by the key it travels under."""
        return {"db": self.db, "coll": self.coll}


@dataclass(frozen=True)
class KafkaEmitPlan:
    """`$emit` to a Kafka topic, written by the Kafka connector's `KafkaEmitWriter`.

    Attributes:
        options: The `$emit` body as Atlas spells it (defaults applied).
        topic: The topic; a computed topic travels under `topic` in `Output.target`.
        computed: Other per-document values (`key`, `headers`, `tombstoneWhen` given as
            expressions: the connector's `kafka_names`), by the key they travel under.
    """

    connection: str
    topic: Name
    options: Mapping[str, Any] = field(default_factory=dict, hash=False)
    computed: Mapping[str, Name] = field(default_factory=dict, hash=False)
    operator: str = "EmitOperator"

    def names(self) -> dict[str, Name]:
        """Every target name, by the key it travels under."""
        return {**self.computed, "topic": self.topic}


SinkPlan = MergePlan | FileEmitPlan | CollectionEmitPlan | KafkaEmitPlan


def computed_names(plan: Any) -> dict[str, Name]:
    """The names of a plan that are evaluated per document (empty for literal targets)."""
    names = getattr(plan, "names", None)
    if names is None:
        return {}
    return {key: name for key, name in names().items() if name.computed}
