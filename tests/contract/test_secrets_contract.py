"""Connection secrets are sealed at rest in every store, and plaintext rows of earlier versions
are sealed when the stores open (SQLite, mongomock, and a real MongoDB when configured)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from service.stores import ConnectionRecord, ConnectionType, SecretBox, SecretKeyError
from service.stores.codec import to_storage_json
from service.stores.sqlite import SqliteStores
from tests.contract.conftest import Harness

T0 = datetime(2024, 5, 1, tzinfo=UTC)
PASSWORDS = ("kafka-pw-1234", "uri-pw-5678", "jaas-secret-9012")


def kafka() -> ConnectionRecord:
    return ConnectionRecord(
        name="events",
        type=ConnectionType.KAFKA,
        config={
            "bootstrapServers": "broker:9092",
            "authentication": {"mechanism": "PLAIN", "username": "app", "password": PASSWORDS[0]},
            "config": {"sasl.jaas.config": f"... password={PASSWORDS[2]}", "acks": "all"},
        },
        created_at=T0,
    )


def cluster() -> ConnectionRecord:
    return ConnectionRecord(
        name="atlas",
        type=ConnectionType.CLUSTER,
        config={"uri": f"mongodb://app:{PASSWORDS[1]}@db.example:27017/x"},
        created_at=T0,
    )


def test_secrets_are_sealed_at_rest_and_open_for_the_engine(harness: Harness) -> None:
    stores = harness.stores
    stores.connections.create(kafka())
    stores.connections.create(cluster())
    at_rest = "\n".join(harness.raw_connections())
    for password in PASSWORDS:
        assert password not in at_rest
    assert "broker:9092" in at_rest and '"username":"app"' in at_rest  # only secrets sealed
    assert "sluice-sealed:v1:" in at_rest
    stores = harness.reopen()
    assert stores.connections.get("events") == kafka()
    assert stores.connections.get("atlas") == cluster()
    listed, _ = stores.connections.list()
    assert listed == [cluster(), kafka()]
    assert "password" not in stores.connections.get("events").public().config["authentication"]


def test_plaintext_rows_of_earlier_versions_are_sealed_when_the_stores_open(
    harness: Harness,
) -> None:
    stores = harness.stores
    stores.connections.create(kafka())
    # What an earlier version wrote: the config in plain text.
    plain = to_storage_json(kafka().config)
    if harness.lane == "sqlite":
        path = Path(stores.database.path)  # type: ignore[attr-defined]
        with sqlite3.connect(path) as conn:
            conn.execute("UPDATE connections SET config = ?", (plain,))
    else:
        stores.database["connections"].update_many({}, {"$set": {"config_json": plain}})  # type: ignore[attr-defined]
    assert PASSWORDS[0] in "\n".join(harness.raw_connections())
    stores = harness.reopen()
    assert PASSWORDS[0] not in "\n".join(harness.raw_connections())
    assert stores.connections.get("events") == kafka()


def test_a_rotated_key_reseals_and_a_wrong_key_refuses_to_open(tmp_path: Path) -> None:
    old, new = Fernet.generate_key(), Fernet.generate_key()
    path = tmp_path / "sluice.db"
    SqliteStores(path, secrets=SecretBox([old], source="old")).connections.create(kafka())
    sealed_before = sqlite3.connect(path).execute("SELECT config FROM connections").fetchone()[0]
    # Rotation: the new key first, the old one still accepted; rows are resealed with the new.
    rotated = SqliteStores(path, secrets=SecretBox([new, old], source="both"))
    assert rotated.connections.get("events") == kafka()
    rotated.close()
    assert sqlite3.connect(path).execute("SELECT config FROM connections").fetchone()[0] != (
        sealed_before
    )
    assert SqliteStores(path, secrets=SecretBox([new], source="new")).connections.get("events") == (
        kafka()
    )
    with pytest.raises(SecretKeyError) as refused:
        SqliteStores(path, secrets=SecretBox([old], source="$SLUICE_SECRET_KEY"))
    message = str(refused.value)
    assert "'events'" in message and "$SLUICE_SECRET_KEY" in message
    assert "not the key they were sealed with" in message


def test_the_key_file_is_created_0600_apart_from_the_store(tmp_path: Path) -> None:
    stores = SqliteStores(tmp_path / "sluice.db")
    stores.connections.create(cluster())
    stores.close()
    key_file = tmp_path / "secret.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    key = key_file.read_text().strip().encode()
    assert key not in (tmp_path / "sluice.db").read_bytes()
    assert SecretBox([key], source="copy").open_config(
        {"uri": _raw_config(tmp_path / "sluice.db")["uri"]}
    ) == {"uri": cluster().config["uri"]}
    key_file.chmod(0o644)
    with pytest.raises(SecretKeyError, match="chmod 600"):
        SqliteStores(tmp_path / "sluice.db")


def test_a_key_from_the_environment_writes_no_key_file(tmp_path: Path) -> None:
    key = Fernet.generate_key().decode()
    box = SecretBox.load(data_dir=tmp_path, environ={"SLUICE_SECRET_KEY": key})
    SqliteStores(tmp_path / "sluice.db", secrets=box).connections.create(cluster())
    assert not (tmp_path / "secret.key").exists()
    with pytest.raises(SecretKeyError, match="not a Fernet key"):
        SecretBox.load(data_dir=tmp_path, environ={"SLUICE_SECRET_KEY": "hunter2"})


def _raw_config(path: Path) -> dict[str, str]:
    import json

    text = sqlite3.connect(path).execute("SELECT config FROM connections").fetchone()[0]
    return dict(json.loads(text))
