"""The API under test: the real app on a `FakeEngine` and embedded stores, behind one key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from service.config.settings import Settings
from service.main import create_app
from service.stores import open_stores
from tests.unit.service.fake_engine import FakeEngine

KEY = "unit-test-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}


def api_client(data_dir: Path, *, engine: FakeEngine | None = None, **settings: Any) -> TestClient:
    """A client of the app with `settings` over the defaults; enter it (`with`) to run the
    app's lifespan."""
    app = create_app(
        Settings(data_dir=data_dir, api_keys=[KEY], **settings),
        engine=engine if engine is not None else FakeEngine(),
        stores=open_stores(data_dir=data_dir),
    )
    return TestClient(app, headers=AUTH)
