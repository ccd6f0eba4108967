"""Settings validation (messages name the variable) and API keys (no Spark, no network)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from service.auth import ApiKeyChecker, accepted_keys
from service.config.api_key_file import ensure_key_file, read_key_file
from service.config.settings import Settings
from service.errors import Unauthorized


@pytest.fixture(autouse=True)
def _no_sluice_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("SLUICE_"):
            monkeypatch.delenv(name)


def test_settings_come_from_sluice_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SLUICE_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("SLUICE_API_KEYS", " key-aaaaaaaaaaaaaaaa , key-bbbbbbbbbbbbbbbb ")
    monkeypatch.setenv("SLUICE_SPARK_CONF", '{"spark.sql.shuffle.partitions": "4"}')
    monkeypatch.setenv("SLUICE_TRIGGER_INTERVAL", "500 milliseconds")
    settings = Settings()
    assert settings.data_dir == tmp_path / "d"
    assert settings.api_keys == ["key-aaaaaaaaaaaaaaaa", "key-bbbbbbbbbbbbbbbb"]
    assert settings.spark_conf == {"spark.sql.shuffle.partitions": "4"}
    assert settings.checkpoint_root == tmp_path / "d" / "checkpoints"
    assert settings.spark_master == "local[*]"


@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("SLUICE_TRIGGER_INTERVAL", "soon", "SLUICE_TRIGGER_INTERVAL"),
        ("SLUICE_DEFAULT_DLQ", "local/db", "SLUICE_DEFAULT_DLQ"),
        ("SLUICE_API_KEYS", "short", "SLUICE_API_KEYS"),
        ("SLUICE_STORE_URL", "postgres://x", "SLUICE_STORE_URL"),
        ("SLUICE_SPARK_MASTER", " ", "SLUICE_SPARK_MASTER"),
    ],
)
def test_bad_values_are_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, named: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=named):
        Settings()


def test_a_default_dlq_is_refused_outside_dev(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_DEFAULT_DLQ", "local/sluice/dlq")
    assert Settings().default_dlq_target == ("local", "sluice", "dlq")
    monkeypatch.setenv("SLUICE_ENV", "prod")
    with pytest.raises(ValidationError, match="SLUICE_DEFAULT_DLQ .* SLUICE_ENV"):
        Settings()


def test_unusable_data_dir_is_reported_by_variable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    settings = Settings(data_dir=blocker / "sub")
    with pytest.raises(ValueError, match="SLUICE_DATA_DIR"):
        settings.prepare_directories()


def test_generated_key_is_private_stable_and_found_again(tmp_path: Path) -> None:
    key = ensure_key_file(tmp_path / "data")
    path = tmp_path / "data" / "api_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert key.startswith("sk_") and len(key) > 32
    assert ensure_key_file(tmp_path / "data") == key
    assert read_key_file(tmp_path / "data") == key
    assert accepted_keys([], tmp_path / "data") == (key,)
    assert accepted_keys(["k" * 16], tmp_path / "data") == ("k" * 16,)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "missing API key"),
        ("", "missing API key"),
        ("Basic dXNlcjpwdw==", "malformed"),
        ("Bearer", "malformed"),
        ("Bearer wrong-key-000000000", "invalid API key"),
    ],
)
def test_api_key_checker_rejects(header: str | None, message: str) -> None:
    checker = ApiKeyChecker(["right-key-0123456789", "other-key-0123456789"])
    with pytest.raises(Unauthorized, match=message):
        checker.check(header)


def test_api_key_checker_accepts_any_configured_key() -> None:
    checker = ApiKeyChecker(["right-key-0123456789", "other-key-0123456789"])
    checker.check("Bearer right-key-0123456789")
    checker.check("bearer   other-key-0123456789")


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1 second", 1000),
        ("500 milliseconds", 500),
        ("0.5s", 500),
        ("250ms", 250),
        ("2 minutes", 120_000),
    ],
)
def test_trigger_interval_in_milliseconds(text: str, ms: int) -> None:
    assert Settings(trigger_interval=text).trigger_interval_ms == ms
