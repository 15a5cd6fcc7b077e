"""A ``bound`` outcome over a grid: the theorem's bound and the measurement at every point.

:func:`grid_bound_outcome` HOLDS iff measured_j ≤ bound_j at every grid point; the headline
numbers (``measured``, ``theoretical``, ``tightness``) are those of the point where the bound
is tightest (smallest bound/measured — the point that decides); ``vacuous`` iff the bound is
at or above the trivial bound at every grid point; the whole grid goes to
``Outcome.extra['grid']`` for the tightness figure (paper_figures/bound_tightness.py)::

    {"name": "n", "values": [...], "measured": [...], "bound": [...], "trivial": [...] | None}
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from verification.core.registry import Outcome, bound_outcome

__all__ = ["grid_bound_outcome"]


def grid_bound_outcome(name: str, values: Sequence[float], measured: Sequence[float],
                       bound: Sequence[float], *, trivial: Sequence[float] | float | None = None,
                       detail: str = "", extra: dict[str, Any] | None = None) -> Outcome:
    """Bound outcome over a grid of ``name`` = ``values`` (see the module docstring)."""
    v = np.asarray(values, dtype=float).ravel()
    m = np.asarray(measured, dtype=float).ravel()
    b = np.asarray(bound, dtype=float).ravel()
    if not (v.size == m.size == b.size) or v.size == 0:
        raise ValueError(f"grid '{name}': values, measured and bound must have one equal, "
                         f"non-zero length, got {v.size}, {m.size}, {b.size}")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(b))):
        raise ValueError(f"grid '{name}': measured and bound must be finite")
    triv = None if trivial is None else np.broadcast_to(
        np.asarray(trivial, dtype=float), v.shape).copy()
    j = deciding_index(m, b)
    holds_all = bool(np.all(m <= b))
    grid = {"name": name, "values": v.tolist(), "measured": m.tolist(), "bound": b.tolist(),
            "trivial": None if triv is None else triv.tolist()}
    where = f"tightest at {name} = {v[j]:.4g} ({np.sum(m > b)} of {v.size} grid points violate)"
    out = bound_outcome(m[j], b[j], trivial=None if triv is None else triv[j],
                        detail=f"{where}; {detail}" if detail else where,
                        extra={**dict(extra or {}), "grid": grid})
    # VACUOUS needs the bound above the trivial one at *every* grid point
    vacuous = None if triv is None else bool(np.all(b >= triv))
    return replace(out, holds=holds_all, vacuous=vacuous)  # holds: = out.holds unless a bound < 0


def deciding_index(measured: Sequence[float], bound: Sequence[float]) -> int:
    """The grid point where the bound is tightest (smallest bound/measured; a measurement
    <= 0 counts as infinitely loose): the point :func:`grid_bound_outcome` reports."""
    m = np.asarray(measured, dtype=float).ravel()
    b = np.asarray(bound, dtype=float).ravel()
    with np.errstate(divide="ignore"):
        tight = np.where(m > 0, b / np.where(m > 0, m, 1.0), np.inf)
    return int(np.argmin(tight))


def with_certificate(out: Outcome, certificates: Sequence[dict], measured: Sequence[float],
                     bound: Sequence[float]) -> Outcome:
    """``out`` with the certificate of its deciding grid point in ``extra['certificate']``
    and every point's in ``extra['certificates_per_point']`` (dicts ``{"value", "name",
    "delta"}``, verification/estimators/certificates.py)."""
    j = deciding_index(measured, bound)
    cert = certificates[j]
    value = "n/a" if cert["value"] is None else f"{cert['value']:.4g}"
    return replace(out, detail=f"{out.detail}; certificate at the deciding point: {value}",
                   extra={**out.extra, "certificate": cert,
                          "certificates_per_point": list(certificates)})
