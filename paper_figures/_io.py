"""Small output helpers shared by the figure scripts (``_``-prefixed: not a figure module)."""

from __future__ import annotations

import csv
import pathlib
from typing import Iterable, Sequence


def write_csv(path: pathlib.Path, header: Sequence[str], rows: Iterable[Sequence]) -> pathlib.Path:
    """Write ``header`` then ``rows`` to ``path`` as CSV; returns ``path``."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path
