"""The data home: where ``--data NAME`` (no directory) and ``pflt data fetch NAME`` (no
``--dir``) look and write.

``$PFLT_DATA`` if set, else the user cache directory (``$XDG_CACHE_HOME`` or ``~/.cache``
on Linux, ``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows) + ``pfl-theory/data``;
each dataset in its own sub-directory (``mnist``, ``fmnist``, ``emnist`` for every EMNIST
split, ``cifar10``, ``cifar100``).  A dataset not in the home is also looked for where an OS
package installs it: Fashion-MNIST in ``/usr/share/datasets/fashion-mnist`` (Debian/Ubuntu
``apt-get install dataset-fashion-mnist``).
"""

from __future__ import annotations

import os
from pathlib import Path

from pfl_theory.user_cache import user_cache_dir
from synthetic.real_data import registry
from synthetic.real_data.validate import find_file

__all__ = ["candidate_dirs", "data_home", "fetch_hint", "find_dataset", "resolve_dataset"]


def data_home() -> Path:
    """``$PFLT_DATA``, else the user cache directory's ``pfl-theory/data``."""
    env = os.environ.get("PFLT_DATA")
    if env:
        return Path(env).expanduser()
    return user_cache_dir() / "data"


def candidate_dirs(name: str) -> list[Path]:
    """Where ``name`` is looked for, in order: the data home's sub-directory, then the
    directories of OS packages."""
    entry = registry.entry(name)
    return [data_home() / entry.home, *map(Path, entry.system_dirs)]


def _complete(entry: registry.DatasetEntry, root: Path) -> bool:
    from synthetic.real_data.load import _file_dir

    base = _file_dir(entry, root)
    return root.is_dir() and all(find_file(base, f) is not None for f in entry.files)


def find_dataset(name: str) -> Path | None:
    """The first of :func:`candidate_dirs` holding every file of ``name``, or ``None``."""
    entry = registry.entry(name)
    return next((d for d in candidate_dirs(name) if _complete(entry, d)), None)


def fetch_hint(name: str) -> str:
    return f"pflt data fetch {registry.entry(name).name}"


def resolve_dataset(name: str) -> Path:
    """:func:`find_dataset`, or a one-line ``FileNotFoundError`` saying where it looked and
    how to fetch."""
    found = find_dataset(name)
    if found is None:
        where = ", ".join(str(d) for d in candidate_dirs(name))
        raise FileNotFoundError(
            f"dataset {registry.entry(name).name} not found in {where} (the data home is "
            f"$PFLT_DATA, else {data_home()}); fetch it with: {fetch_hint(name)}, or give "
            f"its directory: --data {name}:DIR")
    return found
