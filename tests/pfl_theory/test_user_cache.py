"""The user cache directory (:mod:`pfl_theory.user_cache`)."""

import sys

import pytest

from pfl_theory.user_cache import user_cache_dir


@pytest.mark.skipif(sys.platform in ("darwin", "win32"), reason="XDG on Linux only")
def test_xdg_cache_home_then_home_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert user_cache_dir() == tmp_path / "pfl-theory"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_dir() == tmp_path / "home" / ".cache" / "pfl-theory"
