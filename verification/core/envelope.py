"""The verdict rules of an ``envelope`` (shape) check: measured against a bound's shape over a
grid of one variable, up to one hidden constant.

An O(·) *upper* bound (``claim="upper"``, the default) says measured ≤ C · shape for some
constant C; it does not say the measurement follows the shape.  A measurement that decays
*faster* than the bound respects it (the bound is loose in that variable, and the report names
the rate gap); only a measurement that decays *slower* refutes it.  The one-sided rule:

* fit the constant on the first half of the grid (C = max measured/shape over its first
  ⌈n/2⌉ points — the smallest C with measured ≤ C · shape there) and test the second half:
  ``rise`` = max measured/shape over the second half ÷ C;
* HOLDS iff ``rise`` ≤ ``factor`` (the band fixed in the check's definition, before any run);
  FAILS otherwise (the measurement climbs out of the fitted envelope: it decays slower).

Only a claim of an exact order Θ(·) (``claim="exact"``) is two-sided: the spread max/min of
measured/shape over the whole grid must stay within ``factor``.

With the grid's values (``grid=``) both rules report the fitted log-log slopes ("bound
n^-0.50, measured n^-1.07: looser in n by 0.57"), and two more rules apply:

* **the grid does not exercise the scaling** — |slope| < :data:`FLAT_SLOPE` for the measurement
  *and* the bound: INCONCLUSIVE (over 1.5 decades, |slope| < 0.05 moves a value by < 19%, within
  any band; a HOLDS there would test nothing);
* **plateau** — an upper bound whose values carry the theorem's own constants
  (``explicit=True``), a flat measurement (|slope| < :data:`FLAT_SLOPE`) that stays below the
  bound at every grid point but rises out of the fitted envelope: INCONCLUSIVE — the run has not
  left its plateau, and the grid ends before the bound's decay can bind (the theorem allows
  everything measured there; no constant fitted to a flat stretch says how it continues).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["FLAT_SLOPE", "CLAIMS", "envelope_rule", "log_slope"]

#: |log-log slope| below which a side is "flat": over 1.5 decades it moves by < 10^0.075 = 1.19
FLAT_SLOPE = 0.05
CLAIMS = ("upper", "exact")


def log_slope(x: Any, y: Any) -> float:
    """Least-squares slope of log y on log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def rate_gap_text(name: str, slope_measured: float, slope_bound: float) -> str:
    """``bound n^-0.50, measured n^-1.07: looser in n by 0.57``; the other way round
    ``… measured decays slower than the bound in n by 0.30`` (``grows faster`` for a bound
    that rises along the grid); ``same rate`` within :data:`FLAT_SLOPE`."""
    gap = slope_bound - slope_measured
    head = f"bound {name}^{slope_bound:.2f}, measured {name}^{slope_measured:.2f}"
    if abs(gap) < FLAT_SLOPE:
        return f"{head}: same rate in {name} (slope gap {-gap:+.2f})"
    if gap > 0:
        return f"{head}: looser in {name} by {gap:.2f}"
    how = "decays slower than" if slope_bound < 0 else "grows faster than"
    return f"{head}: measured {how} the bound in {name} by {-gap:.2f}"


def envelope_rule(measured: Any, shape: Any, *, factor: float, claim: str = "upper",
                  grid: Any = None, name: str = "x", explicit: bool = False
                  ) -> tuple[str, float, str, dict[str, Any]]:
    """``(verdict, statistic, line, info)`` by the rules of the module docstring: verdict
    ``"HOLDS"``, ``"FAILS"`` or ``"INCONCLUSIVE"``; statistic = the rise (upper) or the spread
    (exact) compared with ``factor``; info: ``C`` (the constant with measured ≤ C · shape on
    the whole grid), ``C_min``, ``ratios``, ``claim``, and with a grid the slopes."""
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    m = np.asarray(measured, dtype=float).ravel()
    g = np.asarray(shape, dtype=float).ravel()
    if m.shape != g.shape or m.size < 2:
        raise ValueError(f"envelope needs >= 2 grid points of equal length, got "
                         f"{m.size} measured and {g.size} shape values")
    if not (np.all(np.isfinite(m)) and np.all(np.isfinite(g)) and np.all(m > 0)
            and np.all(g > 0)):
        raise ValueError("envelope needs finite positive measured and shape values")
    if not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"envelope factor must be a finite number >= 1, got {factor!r}")
    ratio = m / g
    info: dict[str, Any] = {"C": float(ratio.max()), "C_min": float(ratio.min()),
                            "ratios": ratio.tolist(), "claim": claim}
    if claim == "exact":
        stat = float(ratio.max() / ratio.min())
        info["spread"] = stat
        verdict = "HOLDS" if stat <= factor else "FAILS"
        line = (f"Θ claim (two-sided): measured/shape spread {stat:.3g} <= factor {factor:g}? "
                f"implied C = {ratio.max():.4g} (min {ratio.min():.4g}) over {m.size} grid "
                f"points")
    else:
        half = math.ceil(m.size / 2)
        c_fit = float(ratio[:half].max())
        stat = float(ratio[half:].max() / c_fit)
        info.update(rise=stat, C_first_half=c_fit,
                    spread=float(ratio.max() / ratio.min()))
        verdict = "HOLDS" if stat <= factor else "FAILS"
        line = (f"O(·) upper bound (one-sided): constant fitted on the first {half} of "
                f"{m.size} grid points C = {c_fit:.4g}; second half rises to {stat:.3g} × C "
                f"<= factor {factor:g}?")
    if grid is not None:
        x = np.asarray(grid, dtype=float).ravel()
        if x.shape != m.shape or np.any(x <= 0):
            raise ValueError(f"grid must hold {m.size} positive values, got {x.tolist()}")
        sm, sb = log_slope(x, m), log_slope(x, g)
        info.update(slope_measured=sm, slope_bound=sb)
        line += "; " + rate_gap_text(name, sm, sb)
        if abs(sm) < FLAT_SLOPE and abs(sb) < FLAT_SLOPE:
            verdict = "INCONCLUSIVE"
            line += (f"; neither side moves (|slope| < {FLAT_SLOPE}): the grid does not "
                     f"exercise the scaling in {name}")
        elif (verdict == "FAILS" and claim == "upper" and explicit and abs(sm) < FLAT_SLOPE
              and np.all(ratio <= 1.0)):
            verdict = "INCONCLUSIVE"
            line += (f"; the measurement is flat (plateau) and below the bound with its own "
                     f"constants at every point ({1 / ratio.max():.3g}× below at the closest): "
                     f"the grid ends before the bound's decay in {name} can bind")
    return verdict, stat, f"{line}: {verdict}", info
