"""Shared by the oracle tests: run an algorithm's ``engine_equals_oracle`` check."""

import pytest

from verification.core.registry import load_all, run_check


@pytest.fixture(scope="session")
def checks():
    return load_all()


@pytest.fixture
def verdict(checks):
    """``verdict(algorithm)``: the verdict of ``<algorithm>.engine_equals_oracle`` (quick)."""
    def run(name, check_id=None):
        result = run_check(checks[check_id or f"{name}.engine_equals_oracle"], size="quick",
                           seed=0)
        assert result.verdict.value != "ERROR", result.detail
        return result.verdict.value
    return run
