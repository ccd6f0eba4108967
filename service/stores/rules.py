"""Input checks shared by both store implementations (so they reject exactly the same things)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .base import DlqQuery
from .codec import normalize_document
from .errors import InvalidDocument, InvalidQuery

_BAD_DB_CHARS = frozenset('/\\. "$\0')


def check_namespace(db: str, coll: str) -> None:
    """Rejects database/collection names MongoDB would refuse, in every store.

    Raises:
        InvalidQuery: On an empty name, a character MongoDB forbids, or a ``system.``
            collection.
    """
    if not db or any(c in _BAD_DB_CHARS for c in db) or len(db) > 63:
        raise InvalidQuery(f"invalid database name {db!r}", path="/db")
    if not coll or "$" in coll or "\0" in coll or coll.startswith("system."):
        raise InvalidQuery(f"invalid collection name {coll!r}", path="/coll")


def check_paging(*, offset: int, limit: int | None) -> None:
    """Rejects negative paging values (a negative limit means something else to MongoDB)."""
    if offset < 0:
        raise InvalidQuery("offset must be >= 0", path="/offset")
    if limit is not None and limit < 0:
        raise InvalidQuery("limit must be >= 0", path="/limit")


def check_purge_query(query: DlqQuery) -> None:
    """Purge deletes every match: a skip or limit would suggest otherwise, so refuse them."""
    if query.skip or query.limit is not None:
        msg = "purge deletes every matching document; skip and limit must not be set"
        raise InvalidQuery(msg, path="/limit" if query.limit is not None else "/skip")


def prepare_dlq_document(processor: str, doc: Mapping[str, Any], *, index: int) -> dict[str, Any]:
    """Validates one Atlas-shaped DLQ document and returns its normalised copy.

    Only the fields the stores index are required: ``_id`` (non-empty string), ``errInfo.reason``
    (string), ``operatorName`` (string) and ``dlqTime`` (aware datetime). ``processorName``
    is filled in when absent and must equal ``processor`` otherwise. Other fields
    (``_stream_meta``, ``doc``, ``missedWindowStartTimes``, ...) are kept as given: the DLQ is
    the last resort for bad data, so it rejects as little as it can.

    Raises:
        InvalidDocument: With a path like ``/3/errInfo/reason``.
    """
    base = f"/{index}"
    out: dict[str, Any] = normalize_document(dict(doc), path=base)
    _require(isinstance(out.get("_id"), str) and out["_id"], f"{base}/_id", "a non-empty string")
    info = out.get("errInfo")
    reason = info.get("reason") if isinstance(info, dict) else None
    _require(isinstance(reason, str), f"{base}/errInfo/reason", "a string")
    _require(isinstance(out.get("operatorName"), str), f"{base}/operatorName", "a string")
    _require(isinstance(out.get("dlqTime"), datetime), f"{base}/dlqTime", "an aware datetime")
    name = out.setdefault("processorName", processor)
    if name != processor:
        msg = f"processorName {name!r} does not match the processor {processor!r}"
        raise InvalidDocument(msg, path=f"{base}/processorName")
    return out


def _require(ok: object, path: str, expected: str) -> None:
    if not ok:
        raise InvalidDocument(f"DLQ documents need {expected} here", path=path)
