"""A class-data archive of Spark's JVM, so that a SparkSession starts in about half the time.

A local SparkSession spends most of its cold start loading and verifying Spark's classes
(measured here: 10.4-11.5 s to a first query without an archive, 5.4-6.1 s with one). The
JVM can save the classes it loaded into a file (`-XX:ArchiveClassesAtExit`, dynamic CDS)
and map that file at the next start (`-XX:SharedArchiveFile`). The archive belongs to one
JVM build and one Spark class path, so its name carries a digest of both; a JVM that finds
it does not match ignores it and starts as before.

The archive is built once per machine by a separate `spark-submit` run of a small warm-up
job (`python -m pipeline_stages._engine.class_archive`): there the JVM is the parent
process and writes the archive when it exits, after which the builder moves it into place,
so no JVM ever maps a half-written file. `build_session` uses the archive when it is there
and otherwise starts the build in the background, never waiting for it.

`SLUICE_JVM_ARCHIVE=off` turns all of it off; `SLUICE_JVM_ARCHIVE_DIR` moves the archives
(default `~/.cache/sluice/jvm`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Unified-logging tags silenced on the archive's behalf: a JVM that cannot use the archive
#: (another JVM build, another class path) says so on stderr and carries on without it.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: The job whose classes the archive holds.
WARM_UP = Path(__file__).with_name("class_archive_warm_up.py")
#: The warm-up job's longest run; a build that takes longer is abandoned.
BUILD_TIMEOUT_SECONDS = 300


def enabled() -> bool:
    """Whether Sluice may use and build archives (`SLUICE_JVM_ARCHIVE=off` says no)."""
    return os.environ.get("SLUICE_JVM_ARCHIVE", "on").lower() not in {"off", "0", "false"}


def spark_home() -> Path:
    """The Spark distribution PySpark runs (its `bin/spark-submit` and `jars/`)."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home())


def java_executable() -> Path | None:
    """The `java` that `spark-submit` will run (JAVA_HOME first, as Spark's launcher does)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where the archive for this JVM and this Spark lives, or None without a `java`."""
    java = java_executable()
    if java is None:
        return None
    jars = spark_home() / "jars"
    digest = hashlib.sha256()
    for part in (java, *sorted(jars.glob("*.jar"))):
        stat = part.stat()
        digest.update(f"{part}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    return archive_dir() / f"spark-{digest.hexdigest()[:16]}.jsa"


def archive_dir() -> Path:
    """The directory of this machine's archives."""
    default = Path.home() / ".cache" / "sluice" / "jvm"
    return Path(os.environ.get("SLUICE_JVM_ARCHIVE_DIR", default))


def driver_java_options(current: str | None) -> str | None:
    """`current` driver JVM options plus the archive's, if it exists; else start building it
    in the background and return `current` unchanged."""
    path = archive_path() if enabled() else None
    if path is None:
        return current
    if not is_intact(path):
        start_background_build()
        return current
    return " ".join(filter(None, [current, f"-XX:SharedArchiveFile={path}", QUIET]))


def is_intact(path: Path) -> bool:
    """Whether `path` is a checked archive of the size it had when checked.

    A truncated archive crashes the JVM that maps it (SIGBUS), so an archive is used only
    after a JVM started on it (`_starts_on`) and only while its size is the one recorded
    then, in a file beside it.
    """
    try:
        return path.stat().st_size == int(_checked(path).read_text())
    except (OSError, ValueError):
        return False


def _checked(path: Path) -> Path:
    return path.with_suffix(".checked")


def start_background_build() -> None:
    """Build the archive in a detached process (it outlives this one if need be)."""
    subprocess.Popen(
        [sys.executable, "-m", "pipeline_stages._engine.class_archive"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def build(path: Path, *, wait: bool = False) -> bool:
    """Build the archive at `path` unless it is there, or another process is building it
    (then return at once, or with `wait` once that build has ended).

    Returns whether an intact archive is there afterwards.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return is_intact(path)  # another process builds it
        if is_intact(path):
            return True
        with tempfile.TemporaryDirectory(dir=path.parent) as work:
            staged = Path(work) / path.name
            if _run_spark_submit([f"-XX:ArchiveClassesAtExit={staged}"], WARM_UP) and (
                staged.exists() and _run_spark_submit([f"-XX:SharedArchiveFile={staged}"])
            ):
                os.replace(staged, path)
                _checked(path).write_text(str(path.stat().st_size))
    return is_intact(path)


def _run_spark_submit(java_options: list[str], job: Path | None = None) -> bool:
    """One `spark-submit` with `java_options`: of the warm-up `job` (the JVM writes its
    archive as it exits), or without one (`--version`: a JVM start on the archive)."""
    submit = spark_home() / "bin" / "spark-submit"
    options = " ".join([*java_options, QUIET])
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [str(submit), "--master", "local[1]", "--driver-java-options", options]
    try:
        done = subprocess.run(
            [*command, str(job) if job else "--version"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def main() -> int:
    """Build this machine's archive (a no-op when it exists or is being built)."""
    path = archive_path() if enabled() else None
    return 0 if path is not None and build(path) else 1


if __name__ == "__main__":
    raise SystemExit(main())
