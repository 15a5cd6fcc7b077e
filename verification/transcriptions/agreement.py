"""Comparing a pfl_theory function with its transcription: random points and relative error.

Used by the ``*.transcription_*`` identity checks.  Points are drawn so that a generated
formula mutant (:mod:`verification.mutation.generated`) changes the value: positive
parameters log-uniform over at least a decade, never 1 and (almost surely) pairwise
distinct, so a dropped factor, an exponent off by ½ or two swapped arguments move the
result by far more than round-off.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from verification.core.registry import Outcome


def log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    """One float log-uniform on [lo, hi] (0 < lo < hi)."""
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def int_between(rng: np.random.Generator, lo: int, hi: int) -> int:
    """One int, log-uniform on [lo, hi] (lo >= 2, so never the value 1)."""
    return int(round(log_uniform(rng, lo, hi)))


def rel_diff(a: Any, b: Any) -> float:
    """max |a − b| / max(|a|, |b|), the maxima over all entries (a norm-wise relative
    difference: 0 if both are 0; inf when the shapes differ or one side is not finite while
    the other is)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        return math.inf
    if x.size == 0:
        return 0.0
    both_inf = np.isinf(x) & np.isinf(y) & (np.sign(x) == np.sign(y))
    x, y = np.where(both_inf, 0.0, x), np.where(both_inf, 0.0, y)
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return math.inf
    scale = max(float(np.max(np.abs(x))), float(np.max(np.abs(y))))
    return float(np.max(np.abs(x - y))) / scale if scale > 0 else 0.0


class Agreement:
    """Collects the worst relative difference per compared quantity."""

    def __init__(self) -> None:
        self.worst: dict[str, float] = {}

    def add(self, name: str, ours: Any, theirs: Any) -> None:
        """Record |ours − theirs| (relative) for ``name``; keeps the maximum."""
        d = rel_diff(ours, theirs)
        self.worst[name] = max(self.worst.get(name, 0.0), d)

    def add_equal(self, name: str, ours: Any, theirs: Any) -> None:
        """A non-numeric field (a regime label, an index, an exponent): 0 if equal, else inf."""
        same = bool(np.all(np.asarray(ours) == np.asarray(theirs))) if (
            np.shape(ours) == np.shape(theirs)) else False
        self.worst[name] = max(self.worst.get(name, 0.0), 0.0 if same else math.inf)

    def outcome(self, tolerance: float, points: int, functions: Iterable[str]) -> Outcome:
        """HOLDS iff every recorded difference is <= ``tolerance``; ``measured`` is the
        overall maximum (per-quantity maxima in ``extra``)."""
        if not self.worst:
            raise ValueError("nothing was compared")
        name, worst = max(self.worst.items(), key=lambda kv: kv[1])
        return Outcome(
            measured=worst, theoretical=0.0, holds=worst <= tolerance,
            detail=(f"max relative difference pfl_theory vs transcription over {points} "
                    f"points: {worst:.2e} (worst: {name}); functions: "
                    f"{', '.join(functions)}"),
            extra={"max_rel_diff": dict(self.worst), "points": points})

