"""API keys: `Authorization: Bearer <key>` on every route except `/healthz`.

Keys come from `SLUICE_API_KEYS`. When it is unset, the service generates a key on first
start and writes it to `<data_dir>/api_key` with mode 0600 (created atomically with that
mode, so it is never readable by others even briefly); the CLI on the same machine reads
the same file. Keys are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from pathlib import Path

from service.config.api_key_file import ensure_key_file, key_file, read_key_file
from service.errors import Unauthorized

__all__ = ["ApiKeyChecker", "accepted_keys", "ensure_key_file", "key_file", "read_key_file"]


def accepted_keys(configured: Sequence[str], data_dir: Path) -> tuple[str, ...]:
    """The configured keys, or the generated one when none is configured."""
    return tuple(configured) if configured else (ensure_key_file(data_dir),)


class ApiKeyChecker:
    """Checks a request's `Authorization` header against the accepted keys."""

    def __init__(self, keys: Sequence[str]) -> None:
        self._keys = tuple(k.encode() for k in keys)

    def check(self, authorization: str | None) -> None:
        """Return when the header carries an accepted key; raise `Unauthorized` otherwise."""
        if not authorization:
            raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("malformed Authorization header: use 'Bearer <key>'")
        given = token.strip().encode()
        # Compare against every key so the time taken does not reveal which one is close.
        matches = [hmac.compare_digest(given, key) for key in self._keys]
        if not any(matches):
            raise Unauthorized("invalid API key")
