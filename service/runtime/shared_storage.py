"""The shared-storage rule: on a Spark cluster, every path a query touches must be shared.

Executors on other machines write the checkpoint's state store files, read the HTTP-ingest
spool (`<data dir>/spool`) and read or write `File` connection directories. A plain local
path that only the service's machine has would fail later, inside Spark, with an error that
names neither the setting nor the fix; so a processor start checks first and is refused with
409 `STORAGE_NOT_SHARED`, one `{code, path, message}` per offending location.

A location counts as shared when the master is local (`local[*]`: one machine), when it is a
URI with a scheme other than `file` (`hdfs://`, `s3a://`...), when it lies on a network file
system mount (NFS, CIFS, Ceph, Lustre... read from `/proc/self/mountinfo`), or when the
operator declares local paths shared with `SLUICE_SHARED_STORAGE=true` (a volume mounted at
the same path on every node, or a loopback test cluster whose nodes share one disk).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pipeline_stages._base import Problem, escape_pointer_token
from service.config.settings import Settings
from service.errors import ResourceConflict
from service.runtime.engine import Connection

CODE = "storage_not_shared"
#: File systems whose contents every node of a cluster can see (mountinfo `fstype`).
NETWORK_FS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "fuse.glusterfs",
        "lustre", "gpfs", "beegfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.juicefs", "fuse.sshfs",
        "fuse.mountpoint-s3", "fuse.rclone", "efs", "ocfs2", "gfs2",
    }
)  # fmt: skip
_FIX = (
    "put it on storage every Spark node reads at the same path (NFS, a shared volume) and "
    "set SLUICE_SHARED_STORAGE=true, or use a Hadoop URI"
)


class StorageNotShared(ResourceConflict):
    """A processor would use local storage that executors on other machines cannot see."""

    error_code = "STORAGE_NOT_SHARED"


def _mounts(mountinfo: Path) -> list[tuple[str, str]]:
    """`(mount point, fstype)` of every mount (`proc(5)`: fstype follows the `-` field)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    mounts = []
    for line in lines:
        fields = line.split()
        if "-" not in fields:
            continue
        dash = fields.index("-")
        point = fields[4].replace("\\040", " ")
        mounts.append((point, fields[dash + 1]))
    return mounts


def filesystem_type(path: Path, *, mountinfo: Path = Path("/proc/self/mountinfo")) -> str | None:
    """The type of the file system holding `path` (the longest mount point prefix)."""
    target = path.resolve()  # a symlink into a network mount counts as that mount
    best: tuple[int, str] | None = None
    for point, fstype in _mounts(mountinfo):
        mount = Path(point)
        if (target == mount or mount in target.parents) and (best is None or len(point) > best[0]):
            best = (len(point), fstype)
    return None if best is None else best[1]


def is_shared(location: str | Path, settings: Settings, *, mountinfo: Path | None = None) -> bool:
    """Whether every node of the cluster can use `location` (see the module docstring)."""
    if settings.is_local_master or settings.shared_storage:
        return True
    text = str(location)
    scheme = urlsplit(text).scheme
    if scheme not in ("", "file"):
        return True
    path = Path(urlsplit(text).path) if scheme == "file" else Path(text)
    kind = filesystem_type(path, mountinfo=mountinfo or Path("/proc/self/mountinfo"))
    return kind in NETWORK_FS


def _connection_refs(value: Any, path: str = "/pipeline") -> Iterator[tuple[str, str]]:
    """`(JSON pointer, name)` of every `connectionName` in a pipeline document."""
    if isinstance(value, Mapping):
        name = value.get("connectionName")
        if isinstance(name, str):
            yield f"{path}/connectionName", name
        for key, item in value.items():
            yield from _connection_refs(item, f"{path}/{escape_pointer_token(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _connection_refs(item, f"{path}/{index}")


def storage_problems(
    settings: Settings,
    *,
    pipeline: Any,
    connections: Mapping[str, Connection],
    mountinfo: Path | None = None,
) -> list[Problem]:
    """One problem per location of this run that executors could not reach."""
    if settings.is_local_master:
        return []
    master = settings.spark_master
    problems: list[Problem] = []
    if settings.spark_checkpoint_uri is None and not is_shared(
        settings.checkpoint_root, settings, mountinfo=mountinfo
    ):
        message = (
            f"checkpoint root {settings.checkpoint_root} is a local directory, but executors "
            f"of {master} write state there; {_FIX} (SLUICE_CHECKPOINT_ROOT)"
        )
        problems.append(Problem(CODE, "/settings/SLUICE_CHECKPOINT_ROOT", message))
    spool = settings.data_dir / "spool"
    for pointer, name in _connection_refs(pipeline):
        connection = connections.get(name)
        kind = connection.type if connection is not None else ""
        if kind == "HttpIngest" and not is_shared(spool, settings, mountinfo=mountinfo):
            message = (
                f"HttpIngest connection {name!r} is read by executors from the spool in "
                f"{spool}, a local directory; {_FIX} (SLUICE_DATA_DIR)"
            )
            problems.append(Problem(CODE, pointer, message))
        elif kind == "File" and connection is not None:
            directory = str(connection.config.get("directory", ""))
            if directory and not is_shared(directory, settings, mountinfo=mountinfo):
                message = (
                    f"File connection {name!r} points at {directory}, a local directory "
                    f"executors of {master} cannot read; {_FIX}"
                )
                problems.append(Problem(CODE, pointer, message))
    return problems


def check_shared_storage(
    settings: Settings, *, pipeline: Any, connections: Mapping[str, Connection]
) -> None:
    """Refuse a run whose storage executors cannot reach.

    Raises:
        StorageNotShared: Listing every offending location.
    """
    problems = storage_problems(settings, pipeline=pipeline, connections=connections)
    if problems:
        detail = (
            f"the processor cannot run on {settings.spark_master}: "
            f"{len(problems)} location(s) are not on shared storage"
        )
        raise StorageNotShared(detail, problems=problems)
