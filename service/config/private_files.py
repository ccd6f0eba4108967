"""Files the service writes are the service user's alone: 0600 files, 0700 directories.

The data directory holds connection secrets (encrypted, with the key beside them unless it
comes from the environment), the API key, checkpoints, spools and DLQ records. Three rules keep
them private whatever the environment's umask and however the directory was made:

* the service process runs with umask 077 (`restrict_umask`), set before anything is created
  and before Spark's JVM starts (it inherits the mask), so every file and directory Sluice,
  SQLite or Spark creates lacks group and other permissions;
* files Sluice creates on purpose are opened with mode 0600 (`create_private_file`) and the
  directories it creates get 0700 (`make_private_dir`), even where the mask is not in force
  (a library or a test that builds the stores directly);
* a data or checkpoint directory that group or others may write to is refused at start
  (`check_private_directory`): anyone who can write there could replace the key, the store or a
  checkpoint. A directory made in advance with 0755 is accepted: what Sluice writes into it is
  0600/0700 anyway.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: The process umask of the service: no permission for group or others.
PRIVATE_UMASK = 0o077
FILE_MODE = 0o600
DIR_MODE = 0o700


class UnsafeDirectory(ValueError):
    """A directory the service would write secrets into is writable by other users."""


def restrict_umask() -> int:
    """Set the process umask to 077; returns the previous mask."""
    return os.umask(PRIVATE_UMASK)


def make_private_dir(directory: Path) -> None:
    """Create `directory` (and missing parents) with mode 0700, whatever the umask.

    Directories that exist already keep their mode (`check_private_directory` judges them).
    """
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    directory.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    for made in missing:
        try:
            made.chmod(DIR_MODE)
        except OSError:
            continue  # made concurrently by someone else: theirs to judge


def check_private_directory(directory: Path, *, variable: str) -> None:
    """Refuse a directory that group or others can write to.

    Raises:
        UnsafeDirectory: Naming the directory, the variable that chose it and the fix.
    """
    try:
        mode = stat.S_IMODE(directory.stat().st_mode)
    except OSError as error:
        raise UnsafeDirectory(f"{variable}: cannot inspect {directory}: {error}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeDirectory(
            f"{variable}: {directory} is writable by other users (mode {mode:04o}); it holds "
            f"secrets and checkpoints, so Sluice refuses to use it. Fix it with "
            f"'chmod go-w {directory}' (or 'chmod 700 {directory}'), or choose another directory."
        )


def create_private_file(path: Path, data: bytes) -> bool:
    """Create `path` with mode 0600 holding `data`, durably; False if it already exists.

    `O_CREAT | O_EXCL` with mode 0600: two processes starting together agree on one file, and
    the file is never readable by others, not even for an instant.
    """
    make_private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(path, FILE_MODE)  # in case the umask was wider than the mode asked for
    return True


def ensure_private_file(path: Path) -> None:
    """Make sure `path` exists as an empty-or-existing file with mode 0600 (for files another
    library opens, e.g. a SQLite database, which takes its journals' mode from it)."""
    make_private_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(fd)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(FILE_MODE)


def readable_by_others(path: Path) -> bool:
    """Whether group or others have any permission on `path`."""
    return bool(stat.S_IMODE(path.stat().st_mode) & 0o077)
