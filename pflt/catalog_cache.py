"""The registries' metadata kept in the user cache, so that ``pflt --help``, ``pflt list``
and ``pflt run --help`` answer without importing torch.

The registries stay the one source (:func:`algorithms.engine.base.registry`, the check
loader of :mod:`verification.core.runner`): :func:`cached` asks them once, stores their
JSON-ready answer in ``<user cache>/pfl-theory/catalog/<name>-<key>.json``
(:func:`pfl_theory.user_cache.user_cache_dir`) and reads it back as long as the key is
the same.  The key (:func:`sources_key`) is a SHA-256 over the Python version and the
bytes of every ``.py`` file of the packages the registries read (:data:`SOURCE_PACKAGES`),
so any edit of a method, a check or the engine's helpers makes the next command ask the
registry again — a cached entry is never stale.  A registry already imported and filled in
this process is asked directly (:func:`pflt.catalog.registered_here`).  The cache is skipped altogether when a
plugin may register something (``PFLT_PLUGINS``, ``--plugin``, an entry point of
:data:`pfl_theory.plugins.GROUPS`), and an answer that JSON does not keep exactly (a
tuple default) or that reports a module failing to import is not stored.

Measured on the project's shared 2-core machine (2026-12-07, load 5.5–6.0, median of 5,
wall of ``python -m pflt …``): ``--help`` 1.94 → 0.21 s, ``list algorithms`` 1.88 → 0.10 s,
``list checks --json`` 3.03 → 0.10 s, ``verify --list`` 3.14 → 0.23 s with the cache filled
(the key: ~20 ms for ~300 files); the first command after an edit asks the registry
(``list algorithms`` 1.95 s).  No torch: see tests/pflt/test_cli_lazy.py.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any, Callable

#: the packages whose sources the cached metadata derive from (methods, engine helpers and
#: models, checks, the theory modules whose docstrings and constants they quote, datasets,
#: figures, and :mod:`pflt.catalog`, whose parsing of the docstrings shapes every entry)
SOURCE_PACKAGES = ("algorithms", "verification", "pfl_theory", "synthetic", "paper_figures",
                   "pflt")
#: files kept per name (one per version of the sources recently used)
KEEP = 8


def cache_dir() -> Path:
    """Where the cached metadata live: the user cache's ``catalog`` directory."""
    from pfl_theory.user_cache import user_cache_dir

    return user_cache_dir() / "catalog"


def sources_key() -> str:
    """SHA-256 (hex, 16 digits) over the Python version and every ``.py`` file (relative
    path and bytes) of :data:`SOURCE_PACKAGES`, found without importing them."""
    digest = hashlib.sha256(sys.version.encode())
    for package in SOURCE_PACKAGES:
        spec = importlib.util.find_spec(package)
        for location in (spec.submodule_search_locations or []) if spec else []:
            root = Path(location)
            for path in sorted(root.rglob("*.py")):
                data = path.read_bytes()
                digest.update(f"{package}/{path.relative_to(root).as_posix()}\0{len(data)}\0"
                              .encode())
                digest.update(data)
    return digest.hexdigest()[:16]


def plugins_in_use() -> bool:
    """Whether a plugin may add algorithms or checks (``PFLT_PLUGINS`` — ``--plugin`` sets
    it too — or an installed entry point of the plugin groups)."""
    from importlib.metadata import entry_points

    from pfl_theory.plugins import GROUPS, plugin_specs

    return bool(plugin_specs()) or any(True for g in GROUPS for _ in entry_points(group=g))


def cached(name: str, build: Callable[[], Any], *, storable: Callable[[Any], bool] = bool
           ) -> Any:
    """``build()`` (a JSON-ready value) read from the cache file of ``name`` when it is
    there for the current :func:`sources_key`, else built and stored — when no plugin is
    in use, ``storable(value)`` holds, JSON gives the value back equal, and the cache
    directory is writable (otherwise the value is only returned).  Of the files of ``name``
    the :data:`KEEP` newest are kept (several checkouts may share the cache)."""
    if plugins_in_use():
        return build()
    folder = cache_dir()
    path = folder / f"{name}-{sources_key()}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = build()
    text = json.dumps(value, ensure_ascii=False)
    if not storable(value) or json.loads(text) != value:
        return value
    try:
        from pfl_theory.safe_files import atomic_write_text

        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        older = sorted((p for p in folder.glob(f"{name}-*.json") if p != path),
                       key=lambda p: p.stat().st_mtime_ns)
        for old in older[:max(0, len(older) - (KEEP - 1))]:
            old.unlink(missing_ok=True)
    except OSError:         # a read-only home: every command asks the registry itself
        pass
    return value

