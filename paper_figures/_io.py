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
