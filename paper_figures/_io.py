"""Small output helpers shared by the figure scripts (``_``-prefixed: not a figure module)."""

from __future__ import annotations

import csv
import os
import pathlib
from typing import Callable, Iterable, Sequence

#: environment variable naming the ``pflt verify`` results a figure draws (set by
#: ``pflt figures --verify-results``)
RESULTS_ENV_VAR = "PFLT_RESULTS_JSON"


def write_csv(path: pathlib.Path, header: Sequence[str], rows: Iterable[Sequence]) -> pathlib.Path:
    """Write ``header`` then ``rows`` to ``path`` as CSV; returns ``path``."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def find_verify_results(out_dir: pathlib.Path,
                        accept: Callable[[pathlib.Path], bool] = lambda path: True
                        ) -> pathlib.Path | None:
    """The ``results.json`` of ``pflt verify`` a figure draws: the file (or directory) named
    by ``$PFLT_RESULTS_JSON`` (an error if it holds none), else the newest ``results.json``
    under ``out_dir`` or at ``verify_out/results.json`` that ``accept`` admits, else ``None``."""
    env = os.environ.get(RESULTS_ENV_VAR)
    if env:
        path = pathlib.Path(env)
        path = path / "results.json" if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"{RESULTS_ENV_VAR}={env!r}: no results.json there")
        return path
    candidates = [p for p in pathlib.Path(out_dir).rglob("results.json") if p.is_file()]
    default = pathlib.Path("verify_out") / "results.json"
    if default.is_file():
        candidates.append(default)
    candidates = [p for p in candidates if accept(p)]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None


def write_or_check_pages(root: pathlib.Path, pages: dict, command: str, *, check: bool) -> int:
    """Write the generated ``pages`` (``{path relative to root: text}``), or with ``check``
    list the ones whose file differs and return 1 (naming ``command``, which rewrites them)."""
    import sys

    stale = []
    for page, text in pages.items():
        path = root / page
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(str(page))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print(f"stale: {', '.join(stale)}: run {command}", file=sys.stderr)
        return 1
    return 0
