"""Where the console's front-end lives, and the fingerprint that ties its build to its sources.

The front-end (`frontend/`: Preact and uPlot, built by Vite) is built into `static/` and that
build is committed, so installing the package needs no Node. `npm run build` records a hash of
the sources it was built from in `static/build-info.json`; `sources_hash()` computes the same
hash here, so a test fails when a source changed without a rebuild.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
FRONTEND_DIR = PACKAGE_DIR / "frontend"
STATIC_DIR = PACKAGE_DIR / "static"
BUILD_INFO = STATIC_DIR / "build-info.json"

#: The files the build depends on (relative to `frontend/`); `frontend/scripts/stamp.mjs`
#: hashes the same list the same way.
SOURCE_ROOTS = ("src", "index.html", "package.json", "package-lock.json", "vite.config.js")


def source_files(root: Path = FRONTEND_DIR) -> list[Path]:
    """The front-end's source files, sorted by their path relative to `root`."""
    files: list[Path] = []
    for name in SOURCE_ROOTS:
        path = root / name
        if path.is_dir():
            files.extend(p for p in path.rglob("*") if p.is_file())
        elif path.is_file():
            files.append(path)
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def sources_hash(root: Path = FRONTEND_DIR) -> str:
    """SHA-256 over each source's relative path and bytes (NUL-separated)."""
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def built_sources_hash() -> str | None:
    """The sources hash recorded by the last build (None when there is no build)."""
    try:
        return str(json.loads(BUILD_INFO.read_text())["sourcesHash"])
    except (OSError, ValueError, KeyError):
        return None
