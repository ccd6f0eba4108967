"""Paths under a File connection's root, for the File source and the File sink.

A File connection names an absolute directory (its root); pipelines name a relative `path`
under it. A path that is absolute, climbs out with `..` or follows a symbolic link out of the
root is refused: a pipeline must never read or write outside the directory an administrator
registered.
"""

from __future__ import annotations

import os
import posixpath


class PathEscapes(ValueError):
    """A `path` that would leave its File connection's root."""


def path_problem(relative: str) -> str | None:
    """Why `relative` cannot be used under a root (None when it can); checked lexically."""
    if not relative or "\x00" in relative:
        return "path must be a non-empty relative path"
    if relative.startswith("/") or relative.startswith("\\"):
        return f"path must be relative to the File connection's directory, got {relative!r}"
    normal = posixpath.normpath(relative)
    if normal == ".." or normal.startswith("../"):
        return f"path {relative!r} leaves the File connection's directory"
    return None


def resolve_under(root: str, relative: str) -> str:
    """The absolute path of `relative` under `root`, symbolic links resolved.

    Raises:
        PathEscapes: When the path is unusable or resolves outside the root.
    """
    problem = path_problem(relative)
    if problem is not None:
        raise PathEscapes(problem)
    real_root = os.path.realpath(root)
    candidate = os.path.realpath(os.path.join(real_root, relative))
    if os.path.commonpath([real_root, candidate]) != real_root:
        raise PathEscapes(f"path {relative!r} resolves outside the File connection's directory")
    return candidate
