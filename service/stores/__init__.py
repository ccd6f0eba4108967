"""Sluice's stores: processors, connections, DLQ and ``$merge`` targets, plus the ingest spool.

Open them with :func:`open_stores` (SQLite by default, MongoDB by URL). The interfaces are in
:mod:`.base`, value rules in :mod:`.codec`, errors in :mod:`.errors`.
"""

from pipeline_stages._connectors.sources.spool import Spool, SpoolError
from pipeline_stages._documents.ejson import from_relaxed_ejson

from .base import (
    ConnectionRecord,
    ConnectionStore,
    ConnectionType,
    DlqQuery,
    DlqStore,
    DocumentStore,
    MergeResult,
    ProcessorError,
    ProcessorRecord,
    ProcessorState,
    ProcessorStore,
    StatsStore,
    new_record_id,
)
from .codec import to_relaxed_ejson
from .errors import (
    AlreadyExists,
    Conflict,
    InvalidDocument,
    InvalidQuery,
    MissingUniqueIndex,
    NotFound,
    StoreError,
)
from .factory import ClusterTarget, Stores, default_store_url, open_stores
from .secrets import SecretBox, SecretKeyError
from .stats_ledger import StatsLedger

__all__ = [
    "AlreadyExists",
    "ClusterTarget",
    "Conflict",
    "ConnectionRecord",
    "ConnectionStore",
    "ConnectionType",
    "DlqQuery",
    "DlqStore",
    "DocumentStore",
    "InvalidDocument",
    "InvalidQuery",
    "MergeResult",
    "MissingUniqueIndex",
    "NotFound",
    "ProcessorError",
    "ProcessorRecord",
    "ProcessorState",
    "ProcessorStore",
    "SecretBox",
    "SecretKeyError",
    "Spool",
    "SpoolError",
    "StatsLedger",
    "StatsStore",
    "StoreError",
    "Stores",
    "default_store_url",
    "from_relaxed_ejson",
    "new_record_id",
    "open_stores",
    "to_relaxed_ejson",
]
