"""The JVM class-data archive is built by a real `spark-submit` and a JVM starts on it."""

from __future__ import annotations

import pytest

from pipeline_stages._engine import class_archive

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_this_machines_archive_is_built_checked_and_starts_a_jvm() -> None:
    """The run's sessions start the build in the background; this waits for it (or builds
    it), then starts one more JVM on it."""
    path = class_archive.archive_path()
    assert path is not None, "no java on this machine"
    assert class_archive.build(path, wait=True)
    assert class_archive.is_intact(path)
    assert class_archive._run_spark_submit([f"-XX:SharedArchiveFile={path}", "-Xshare:on"])
    assert f"-XX:SharedArchiveFile={path}" in (class_archive.driver_java_options(None) or "")
