"""Seed-to-seed summary of repeated runs: mean, sample standard deviation and count.

One implementation for every table that reports "mean ± sd over seeds" (``pflt compare``,
the reproduction reports); a utility, not a formula of the papers.
"""

from __future__ import annotations

import math
from typing import Iterable


def mean_sd(values: Iterable[float | None]) -> tuple[float, float, int]:
    """Mean, sample standard deviation (``nan`` when fewer than two values) and count;
    ``None`` and non-finite values are dropped."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(vals)
    if n == 0:
        return math.nan, math.nan, 0
    mean = sum(vals) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in vals) / (n - 1)) if n > 1 else math.nan
    return mean, sd, n
