"""Fixtures for the verification-machinery tests."""

from __future__ import annotations

import pytest

from verification.core import registry
from verification.core import runner


@pytest.fixture
def fake_registry(monkeypatch):
    """An empty check registry for the test (the real one is restored afterwards), and
    ``runner.load_checks`` returning just that registry — so tests never depend on the
    checks other modules register."""
    saved = dict(registry._REGISTRY)
    registry._REGISTRY.clear()
    monkeypatch.setattr(runner, "load_checks",
                        lambda package="verification.checks", only=None:
                        (dict(sorted(registry._REGISTRY.items())), {}))
    try:
        yield registry._REGISTRY
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(saved)
