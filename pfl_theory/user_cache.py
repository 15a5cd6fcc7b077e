"""The user's cache directory of pfl-theory: ``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows, + ``pfl-theory``.

The data home (:mod:`synthetic.real_data.home`) and the catalogue of the registries
(:mod:`pflt.catalog_cache`) live below it.  Imports nothing but the standard library.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["user_cache_dir"]


def user_cache_dir() -> Path:
    """``<the platform's user cache directory>/pfl-theory`` (not created here)."""
    if sys.platform == "darwin":
        cache = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        cache = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "pfl-theory"
