"""API keys: `Authorization: Bearer <key>` on every route except `/healthz`.

Keys come from `SLUICE_API_KEYS`. When it is unset, the service generates a key on first
start and writes it to `<data_dir>/api_key` with mode 0600 (created atomically with that
mode, so it is never readable by others even briefly); the CLI on the same machine reads
the same file. Keys are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from service.errors import Unauthorized

KEY_FILE_NAME = "api_key"


def key_file(data_dir: Path) -> Path:
    """Where the generated key lives."""
    return data_dir / KEY_FILE_NAME


def read_key_file(data_dir: Path) -> str | None:
    """The generated key, or None when there is none (or it is unreadable)."""
    try:
        text = key_file(data_dir).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def ensure_key_file(data_dir: Path) -> str:
    """The generated key, creating it (mode 0600) on first use.

    Creation uses `O_CREAT | O_EXCL` with mode 0600, so two services starting together agree
    on one key and the file is never world-readable.
    """
    existing = read_key_file(data_dir)
    if existing:
        return existing
    data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = "sk_" + secrets.token_urlsafe(32)
    try:
        fd = os.open(key_file(data_dir), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return read_key_file(data_dir) or key
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(key + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    return key


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
