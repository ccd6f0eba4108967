"""Everything the service writes is private (0600 files, 0700 directories) whatever the umask,
and a data directory other users can write to is refused with the fix (no Spark)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from service.config.private_files import UnsafeDirectory
from service.config.settings import Settings
from service.main import create_app
from tests.unit.service.fake_engine import FakeEngine


@pytest.fixture(autouse=True)
def _keep_umask_and_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith("SLUICE_"):
            monkeypatch.delenv(name)
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_every_file_the_service_writes_is_private_whatever_the_umask(tmp_path: Path) -> None:
    # The most permissive mask, and a data directory made in advance the usual way (0755).
    os.umask(0)
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o755)
    app = create_app(Settings(data_dir=data), engine=FakeEngine())
    key = (data / "api_key").read_text().strip()
    with TestClient(app, headers={"Authorization": f"Bearer {key}"}) as client:
        made = client.post("/api/v1/connections", json={"name": "in1", "type": "HttpIngest"})
        assert made.status_code == 201, made.text
        secret = {"name": "db", "type": "Cluster", "uri": "mongodb://u:pw-123456@h/x"}
        assert client.post("/api/v1/connections", json=secret).status_code == 201
        posted = client.post("/api/v1/ingest/in1", json=[{"a": 1}, {"b": 2}])
        assert posted.status_code == 202, posted.text
        body = {"name": "p", "pipeline": [{"$source": {"connectionName": "in1"}}]}
        assert client.post("/api/v1/processors", json=body).status_code == 201
        started = client.post("/api/v1/processors/p:start")
        assert started.json()["state"] == "STARTED", started.text
    written = list(data.rglob("*"))
    names = {p.name for p in written}
    assert {"sluice.db", "secret.key", "api_key", "checkpoints"} <= names, names
    exposed = {
        str(p.relative_to(data)): f"{mode(p):04o}"
        for p in written
        if mode(p) & 0o077 or (p.is_file() and mode(p) != 0o600)
    }
    assert exposed == {}
    assert all(mode(p) == 0o700 for p in written if p.is_dir())
    assert b"pw-123456" not in (data / "sluice.db").read_bytes()
    assert mode(data) == 0o755  # the administrator's choice is kept


@pytest.mark.parametrize("which", ["data", "checkpoints"])
def test_a_directory_others_can_write_to_is_refused_with_the_fix(
    tmp_path: Path, which: str
) -> None:
    data = tmp_path / "data"
    checkpoints = tmp_path / "checkpoints"
    for directory in (data, checkpoints):
        directory.mkdir(mode=0o700)
    (data if which == "data" else checkpoints).chmod(0o775)
    settings = Settings(data_dir=data, checkpoint_dir=checkpoints, api_keys=["k" * 16])
    with pytest.raises(UnsafeDirectory) as refused:
        create_app(settings, engine=FakeEngine())
    message = str(refused.value)
    unsafe = data if which == "data" else checkpoints
    assert str(unsafe) in message and f"chmod go-w {unsafe}" in message
    assert ("SLUICE_DATA_DIR" if which == "data" else "SLUICE_CHECKPOINT_DIR") in message
    assert not (data / "sluice.db").exists()  # refused before anything was written


def test_sluice_serve_refuses_to_start_and_says_why(tmp_path: Path) -> None:
    from service.cli.app import app

    data = tmp_path / "shared"
    data.mkdir()
    data.chmod(0o777)
    result = CliRunner().invoke(app, ["serve", "--data-dir", str(data)])
    assert result.exit_code == 2
    assert "refusing to start" in result.output and f"chmod go-w {data}" in result.output
