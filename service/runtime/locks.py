"""One driver per checkpoint: a lock file per processor checkpoint directory.

`<checkpoint root>/<processor id>/driver.lock` is `flock`ed by the service process while the
processor's query runs, and holds `{pid, jvmPid, jvmStart}`. The kernel drops the `flock`
when the process dies, however it dies, so a second service on the same data directory can
never run the same processor at the same time.

The JVM is a child of the Python process. PySpark's gateway exits when its stdin (a pipe from
the Python driver) reaches EOF, so it normally dies with the driver, even after `kill -9`
(checked on this machine). Its shutdown still takes a moment, and a wedged JVM could keep a
query running on the checkpoint. So when the lock is taken after an unclean exit (the file
still names a JVM), that JVM is killed if it still runs and is the same process (same start
time in `/proc`, so a recycled PID is never touched) before the new query starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

LOCK_NAME = "driver.lock"
ORPHAN_EXIT_TIMEOUT_SECONDS = 15.0


class CheckpointBusy(RuntimeError):
    """Another live driver holds the checkpoint."""


def process_start_ticks(pid: int) -> int | None:
    """The start time (clock ticks since boot, `/proc/<pid>/stat` field 22) of a live process.

    None when there is no such process or it is a zombie (dead, not yet reaped).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return None
    # The command name (field 2) may contain spaces; fields after it follow the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


class CheckpointLock:
    """The lock of one processor's checkpoint directory (see the module docstring)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self, *, pid: int, jvm_pid: int) -> int | None:
        """Take the lock and record this driver; returns the PID of an orphan JVM it killed.

        Raises:
            CheckpointBusy: When another live process holds the lock.
        """
        if self._fd is not None:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = self._read().get("pid", "?")
            raise CheckpointBusy(
                f"checkpoint {self.directory} is in use by another driver (pid {holder})"
            ) from None
        self._fd = fd
        killed = self._kill_orphan(self._read(), pid=pid, jvm_pid=jvm_pid)
        self._write({"pid": pid, "jvmPid": jvm_pid, "jvmStart": process_start_ticks(jvm_pid)})
        return killed

    def release(self) -> None:
        """Clear the record (a clean exit) and drop the lock."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            self._write({})
        os.close(self._fd)
        self._fd = None

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, record: dict[str, Any]) -> None:
        if self._fd is None:
            return
        data = json.dumps(record).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)
        os.fsync(self._fd)

    @staticmethod
    def _kill_orphan(previous: dict[str, Any], *, pid: int, jvm_pid: int) -> int | None:
        orphan = previous.get("jvmPid")
        if not isinstance(orphan, int) or orphan <= 0 or orphan == jvm_pid:
            return None
        if previous.get("pid") == pid:
            return None  # our own earlier run: its JVM is ours
        started = previous.get("jvmStart")
        if started is None or process_start_ticks(orphan) != started:
            return None  # gone, or the PID now belongs to another process
        with contextlib.suppress(ProcessLookupError):
            os.kill(orphan, signal.SIGKILL)
        deadline = time.monotonic() + ORPHAN_EXIT_TIMEOUT_SECONDS
        while process_start_ticks(orphan) == started and time.monotonic() < deadline:
            time.sleep(0.05)
        return orphan
