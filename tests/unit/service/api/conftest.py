"""Fixtures of the API unit tests."""

from __future__ import annotations

import pytest

from tests.unit.service.fake_engine import FakeEngine


@pytest.fixture
def engine() -> FakeEngine:
    """The app's engine, for tests that look at what it was asked to run."""
    return FakeEngine()
