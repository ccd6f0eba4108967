"""The generated API key's file, `<data_dir>/api_key` (mode 0600; `service.auth`).

Standard library only: the CLI reads the key with every command, and importing the service's
request checking (FastAPI, the pipeline language) cost it ~0.36 s per command.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

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
