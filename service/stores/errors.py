"""Errors raised by Sluice's stores.

Every error carries the service-wide shape ``{code, path, message}`` so the API layer can map
it without parsing strings::

    StoreError                      (code: stable snake_case; declared by the sinks' ports)
    ├── AlreadyExists               duplicate processor/connection name or id
    ├── NotFound                    compare-and-set target is gone
    ├── Conflict                    compare-and-set lost against a concurrent writer
    ├── MissingUniqueIndex          $merge on non-_id fields without a unique index on them
    ├── InvalidDocument (ValueError) naive datetime, unsupported value type, bad DLQ document
    └── InvalidQuery (ValueError)    bad MQL filter, forbidden operator, bad paging for purge
"""

from __future__ import annotations

from pipeline_stages._connectors.ports import StoreError

__all__ = [
    "AlreadyExists",
    "Conflict",
    "InvalidDocument",
    "InvalidQuery",
    "MissingUniqueIndex",
    "NotFound",
    "StoreError",
]


class AlreadyExists(StoreError):
    """A record with the same unique key (name or id) already exists."""

    default_code = "already_exists"


class NotFound(StoreError):
    """The record to update no longer exists."""

    default_code = "not_found"


class Conflict(StoreError):
    """The record changed since it was read (optimistic concurrency check failed)."""

    default_code = "conflict"


class MissingUniqueIndex(StoreError):
    """``$merge`` with ``on`` fields other than ``_id`` needs a unique index on exactly them."""

    default_code = "missing_unique_index"


class InvalidDocument(StoreError, ValueError):
    """A document cannot be stored (naive datetime, unsupported type, missing DLQ field)."""

    default_code = "invalid_document"


class InvalidQuery(StoreError, ValueError):
    """A query cannot be run (malformed or forbidden MQL, bad paging)."""

    default_code = "invalid_query"
