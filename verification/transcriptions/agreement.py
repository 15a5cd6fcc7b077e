"""Comparing a pfl_theory function with its transcription: random points and relative error.

Used by the ``*.transcription_*`` identity checks.  Points are drawn so that a generated
formula mutant (:mod:`verification.mutation.generated`) changes the value: positive
parameters log-uniform over at least a decade, never 1 and (almost surely) pairwise
distinct, so a dropped factor, an exponent off by ½ or two swapped arguments move the
result by far more than round-off.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping

import numpy as np

from verification.core.registry import Outcome

#: both sides evaluate the same closed form in float64 in a different order of operations
#: (products of ≤ 10 factors, one sqrt, logs): relative round-off ≲ 1e-14; 1e-12 leaves 100×
TOL = 1e-12
TOL_REASON = ("float64 evaluation of the same closed form in two orders of operations: "
              "relative round-off ≲ 1e-14 (≤ 10 factors, a sqrt, logs); 1e-12 leaves 100×")


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


# ------------------------------------------- per named float (PLGU and PPFE checks)
def floats_of(value: Any) -> dict[str, float]:
    """Every number of a result, by name, as a float (bools as 0/1, ints exactly): a number, a
    dict, a (named) tuple, an array, a dataclass (``BoundTerms``: its ``terms`` and ``total``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, float] = {}
        for f in dataclasses.fields(value):
            for k, v in floats_of(getattr(value, f.name)).items():
                out[f"{f.name}.{k}" if k else f.name] = v
        return {k.removeprefix("terms."): v for k, v in out.items()}
    if isinstance(value, Mapping):
        out = {}
        for key, v in value.items():
            for k, f in floats_of(v).items():
                out[f"{key}.{k}" if k else str(key)] = f
        return out
    if isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim):
        out = {}
        for i, v in enumerate(value):
            for k, f in floats_of(v).items():
                out[f"{i}.{k}" if k else str(i)] = f
        return out
    if value is None or isinstance(value, str):
        return {}
    return {"": float(value)}


def relative_difference(ours: Any, reference: Any, *, floor: float = 0.0) -> float:
    """max over the floats of |a − b| / max(|a|, |b|, ``floor``) (0 when both are 0); a name
    present on one side only, or a non-finite value, counts as ∞.  ``floor`` = 1 for logs:
    an absolute error δ of log X is the relative error δ of X, so a log near 0 (X ≈ 1) is
    compared absolutely."""
    a, b = floats_of(ours), floats_of(reference)
    if set(a) != set(b):
        return math.inf
    worst = 0.0
    for k, bv in b.items():
        av = a[k]
        if not (math.isfinite(av) and math.isfinite(bv)):
            if av != bv:
                return math.inf
            continue
        scale = max(abs(av), abs(bv), floor)
        worst = max(worst, abs(av - bv) / scale if scale > 0 else 0.0)
    return worst


def identity_outcome(errors: list[float], tolerance: float, what: str) -> Outcome:
    """HOLDS iff the worst relative difference over the points is within ``tolerance``."""
    worst = max((e if math.isfinite(e) else math.inf for e in errors), default=math.inf)
    return Outcome(measured=worst, theoretical=0.0, holds=worst <= tolerance,
                   detail=f"max relative difference pfl_theory vs transcription of {what} over "
                          f"{len(errors)} points: {worst:.2e} (tolerance {tolerance:g})")
