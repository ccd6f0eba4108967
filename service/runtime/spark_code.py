"""Sluice's code on Spark executors: shipping the packages, and checking the executors' Python.

Executors unpickle Sluice's window operator, sources and MQL helpers by module name, so
`pipeline_stages` (and `service`, which the sink and sources reference) must be importable
there. Two ways:

* an executor image with Sluice installed (`SLUICE_SPARK_SHIP_CODE=never`, e.g. the Docker
  image of `deploy/Dockerfile`);
* shipping (the default on cluster masters): a zip of both packages, built from where they are
  installed and named by the hash of their content (so a new build never reuses a stale zip,
  and an unchanged one is not rebuilt), added with `SparkContext.addPyFile`; executors put it
  first on their `sys.path`, ahead of any installed copy.

PySpark refuses to run a Python worker whose minor version differs from the driver's
(`PYTHON_VERSION_MISMATCH`), but only on the first task, deep inside a processor's query. So
the session start runs a tiny job on the executors that reports their Python version and
where they import Sluice from, and fails the engine with a message saying what to fix.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("sluice.service")

PACKAGES = ("pipeline_stages", "service")
ZIP_PREFIX = "sluice-code-"
#: Zip entries get a fixed timestamp: the zip's bytes depend on the code only.
_EPOCH = (1980, 1, 1, 0, 0, 0)
_MISMATCH = re.compile(r"different version:?\s*(\d+\.\d+)\D+?driver:?\s*(\d+\.\d+)")


class ExecutorEnvironmentError(RuntimeError):
    """Executors cannot run Sluice (Python version, missing code, no executor at all)."""


def package_files(packages: Iterable[str] = PACKAGES) -> list[tuple[str, Path]]:
    """`(name in the zip, file)` of every file of the installed packages, sorted by name."""
    found: list[tuple[str, Path]] = []
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ExecutorEnvironmentError(f"package {package!r} is not importable here")
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in root.rglob("*"):
            relative = path.relative_to(root)
            if path.is_dir() or "__pycache__" in relative.parts or path.suffix == ".pyc":
                continue
            if any(part.startswith(".") for part in relative.parts):
                continue
            found.append(((Path(package) / relative).as_posix(), path))
    return sorted(found)


def content_hash(files: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 over names and contents (a renamed or edited file changes it)."""
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def build_code_zip(cache_dir: Path, packages: Iterable[str] = PACKAGES) -> Path:
    """The zip of the packages in `cache_dir`, built unless one with the same hash exists.

    Older zips in the directory are removed: a service ships only its current code.
    """
    files = package_files(packages)
    target = cache_dir / f"{ZIP_PREFIX}{content_hash(files)[:20]}.zip"
    cache_dir.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        handle, temporary = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
        os.close(handle)
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, path in files:
                info = zipfile.ZipInfo(name, date_time=_EPOCH)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
        os.replace(temporary, target)  # atomic: a concurrent reader never sees half a zip
    for old in cache_dir.glob(f"{ZIP_PREFIX}*.zip"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def ship_code(session: Any, cache_dir: Path, packages: Iterable[str] = PACKAGES) -> Path:
    """Build (or reuse) the zip and add it to every executor's Python path."""
    from pyspark import SparkFiles

    archive = build_code_zip(cache_dir, packages)
    session.sparkContext.addPyFile(str(archive))
    # addPyFile also puts the zip first on the *driver's* sys.path (a local-mode
    # convenience); the driver has Sluice installed, and modules imported from a zip
    # cannot read files next to themselves, so take it off again.
    shipped = os.path.join(SparkFiles.getRootDirectory(), archive.name)
    if shipped in sys.path:
        sys.path.remove(shipped)
    log.info("shipping Sluice to executors as %s", archive.name)
    return archive


@dataclass(frozen=True)
class ExecutorReport:
    """What one executor task saw."""

    python: tuple[int, int]
    sluice_from: str
    host: str


def _check_job(session: Any, partitions: int) -> list[ExecutorReport]:
    def report(_: Iterator[Any]) -> Iterator[tuple[int, int, str, str]]:
        # Runs on an executor; defined here so it is pickled by value and never needs
        # Sluice importable just to run the check that says whether it is.
        import socket
        import sys as executor_sys

        try:
            import pipeline_stages

            where = str(pipeline_stages.__file__)
        except ImportError as error:
            where = f"!{error}"
        major, minor = executor_sys.version_info[:2]
        yield major, minor, where, socket.gethostname()

    rdd = session.sparkContext.parallelize(range(partitions), partitions)
    rows = rdd.mapPartitions(report).collect()
    return [ExecutorReport((int(a), int(b)), str(c), str(d)) for a, b, c, d in set(rows)]


def _run_bounded(session: Any, partitions: int, timeout: float) -> list[ExecutorReport]:
    """The check job, cancelled when no executor runs it within `timeout` seconds."""
    context = session.sparkContext
    group = "sluice-executor-check"
    outcome: dict[str, Any] = {}

    def run() -> None:
        context.setJobGroup(group, "Sluice executor environment check", True)
        try:
            outcome["reports"] = _check_job(session, partitions)
        except Exception as error:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=run, name="sluice-executor-check", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        context.cancelJobGroup(group)
        msg = (
            f"no executor ran the environment check within {timeout:g} s "
            "(SLUICE_EXECUTOR_CHECK_TIMEOUT_SECONDS): is the master reachable, and do its "
            "workers have free cores and spark.executor.memory for this application?"
        )
        raise ExecutorEnvironmentError(msg)
    if "error" in outcome:
        raise translate_failure(outcome["error"]) from None
    return list(outcome["reports"])


def translate_failure(error: BaseException) -> ExecutorEnvironmentError:
    """A clear message for a failed check job (Spark's own mismatch error included)."""
    text = str(error)
    match = _MISMATCH.search(text)
    if "PYTHON_VERSION_MISMATCH" in text or match:
        worker, driver = match.groups() if match else ("another version", "this one")
        return ExecutorEnvironmentError(version_message(worker, driver))
    first = text.split("JVM stacktrace:", 1)[0].strip().splitlines()
    summary = first[-1] if first else type(error).__name__
    return ExecutorEnvironmentError(f"the executor environment check failed: {summary[:300]}")


def version_message(executor: str, driver: str) -> str:
    """What to do when executors run another Python minor version than the service."""
    # Executors start the interpreter the driver names (its PYSPARK_PYTHON, by default the
    # service's own executable path), so that path must be a Python of the driver's version
    # on every executor; `spark.pyspark.python` only applies when spark-submit starts Python.
    interpreter = os.environ.get("PYSPARK_PYTHON", sys.executable)
    return (
        f"executors run Python {executor} but the Sluice service (Spark driver) runs Python "
        f"{driver}; PySpark needs the same minor version on both: executors start "
        f"{interpreter} (PYSPARK_PYTHON of the service), which must be Python {driver} on "
        f"every executor, or run the service on Python {executor}"
    )


def check_executors(
    session: Any,
    *,
    timeout: float,
    driver_python: tuple[int, int] | None = None,
    partitions: int = 4,
) -> list[ExecutorReport]:
    """Run the check job; raise `ExecutorEnvironmentError` unless executors can run Sluice."""
    driver = driver_python or (sys.version_info[0], sys.version_info[1])
    reports = _run_bounded(session, partitions, timeout)
    for report in reports:
        if report.python != driver:
            raise ExecutorEnvironmentError(
                version_message(".".join(map(str, report.python)), ".".join(map(str, driver)))
            )
        if report.sluice_from.startswith("!"):
            msg = (
                f"Sluice is not importable on executor host {report.host} "
                f"({report.sluice_from[1:]}): install it in the executor image, or let the "
                "service ship it (SLUICE_SPARK_SHIP_CODE=auto or always)"
            )
            raise ExecutorEnvironmentError(msg)
    where = sorted({r.sluice_from for r in reports})
    log.info("executors run Python %d.%d; Sluice imported from %s", *driver, ", ".join(where))
    return reports
