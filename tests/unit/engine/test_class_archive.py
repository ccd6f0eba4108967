"""Which JVM options a session gets from the class-data archive (no JVM runs here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_stages._engine import class_archive


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SLUICE_JVM_ARCHIVE_DIR", str(tmp_path))
    monkeypatch.delenv("SLUICE_JVM_ARCHIVE", raising=False)
    return tmp_path


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    started: list[bool] = []
    monkeypatch.setattr(class_archive, "start_background_build", lambda: started.append(True))
    return started


def checked_archive(size: int, recorded: int) -> Path:
    path = class_archive.archive_path()
    assert path is not None
    path.write_bytes(b"x" * size)
    path.with_suffix(".checked").write_text(str(recorded))
    return path


def test_without_an_archive_the_options_stay_and_a_build_starts(
    archive_dir: Path, builds: list[bool]
) -> None:
    assert class_archive.driver_java_options("-Xss16m") == "-Xss16m"
    assert class_archive.driver_java_options(None) is None
    assert builds == [True, True]


def test_a_checked_archive_is_mapped_after_the_existing_options(
    archive_dir: Path, builds: list[bool]
) -> None:
    path = checked_archive(64, 64)
    options = class_archive.driver_java_options("-Xss16m")
    assert options == f"-Xss16m -XX:SharedArchiveFile={path} {class_archive.QUIET}"
    assert builds == []


def test_an_archive_whose_size_changed_since_its_check_is_not_mapped(
    archive_dir: Path, builds: list[bool]
) -> None:
    """A truncated archive crashes the JVM that maps it."""
    checked_archive(63, 64)
    assert class_archive.driver_java_options("-Xss16m") == "-Xss16m"
    assert builds == [True]


def test_an_unchecked_archive_is_not_mapped(archive_dir: Path, builds: list[bool]) -> None:
    path = class_archive.archive_path()
    assert path is not None
    path.write_bytes(b"x" * 64)
    assert class_archive.driver_java_options(None) is None


def test_off_means_neither_mapping_nor_building(
    archive_dir: Path, builds: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    checked_archive(64, 64)
    monkeypatch.setenv("SLUICE_JVM_ARCHIVE", "off")
    assert class_archive.driver_java_options("-Xss16m") == "-Xss16m"
    assert builds == []


def test_the_archive_belongs_to_one_java(
    archive_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another JVM build (another `java`) gets another archive name."""
    first = class_archive.archive_path()
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    second = class_archive.archive_path()
    assert first is not None and second is not None
    assert first != second and first.parent == second.parent
