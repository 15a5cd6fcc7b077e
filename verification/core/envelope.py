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

**Power** (issue 41: a 4-point, 1.5-decade grid let n^-0.55 pass a bound of order n^-1 with
rise 2.9 ≤ 3).  With a grid, the rule also tests the *slope gap* Δ = slope(measured/shape)
in log-log (> 0: the measurement decays slower than the bound):

* its confidence interval at :data:`LEVEL` is seed-to-seed when ``measured`` holds one row per
  seed (``[seeds, points]``: the per-seed slopes' mean ± t_{S−1}·sd/√S), otherwise from the
  fit's residuals (± t_{n−2}·se, said in the line);
* upper bound: FAILS when the whole interval lies above :data:`SLOPE_TOLERANCE` (a decay
  slower than the bound's beyond the allowance and beyond the noise refutes the rate), or when
  the interval of the slope over the grid's tail (its last max(3, n − ⌈n/2⌉) points, when
  fewer than all) does (the asymptotic rate is the tail's: a first point 3× high hides an
  n^-0.2 tail from the whole-grid slope; two tests at 95% each, so a right rate is refuted by
  noise with probability ≤ 5%, not 2.5%).  Θ claim: FAILS when the interval lies wholly
  outside ±tolerance;
* the **resolution** — the smallest estimated rate gap this grid at these seeds would refute:
  min(tolerance + half-width of the interval, ln(factor)/ln(x_last/x_half), the gap at which a
  pure power x^Δ rises out of the band) — is printed beside every verdict; a HOLDS whose
  resolution is not below ``next_gap`` (the gap to the next plausible rate, 1/2 by default:
  n^-1 against n^-1/2) is INCONCLUSIVE: the grid is too short (or too noisy) to tell them apart.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["FLAT_SLOPE", "CLAIMS", "LEVEL", "NEXT_RATE_GAP", "SLOPE_TOLERANCE", "envelope_rule",
           "log_slope", "slope_gap_interval"]

#: |log-log slope| below which a side is "flat": over 1.5 decades it moves by < 10^0.075 = 1.19
FLAT_SLOPE = 0.05
CLAIMS = ("upper", "exact")
#: two-sided confidence level of the slope-gap interval
LEVEL = 0.95
#: slope gap allowed before a slower decay counts against the bound: a √log x factor dropped
#: from (or curving) a shape moves the log-log slope by 1/(2 ln x) ≤ 0.15 for x ≥ 28, the
#: smallest grid start of the checks; an exponent error of 1/2 (n^-1 read as n^-1/2) is 3× more
SLOPE_TOLERANCE = 0.15
#: the gap between a claimed rate and the next plausible one (n^-1 against n^-1/2, 1/T against
#: 1/√T): a grid whose resolution is not below it cannot confirm the claimed rate
NEXT_RATE_GAP = 0.5


def log_slope(x: Any, y: Any) -> float:
    """Least-squares slope of log y on log x."""
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def slope_gap_interval(x: Any, ratios: Any, *, level: float = LEVEL
                       ) -> tuple[float, float, str]:
    """``(gap, half_width, how)``: the log-log slope of measured/shape over the grid ``x``
    and the half-width of its ``level`` confidence interval.  ``ratios`` ``[seeds, points]``
    with ≥ 2 seeds: seed-to-seed (per-seed slopes, t_{S−1}·sd/√S); one row: from the
    least-squares residuals (t_{n−2}·se; 0 for an exact power law, inf on 2 points)."""
    from scipy import stats

    lx = np.log(np.asarray(x, dtype=float))
    r = np.log(np.atleast_2d(np.asarray(ratios, dtype=float)))
    q = 0.5 + level / 2
    if r.shape[0] >= 2:
        slopes = np.array([np.polyfit(lx, row, 1)[0] for row in r])
        hw = float(stats.t.ppf(q, r.shape[0] - 1) * slopes.std(ddof=1) / math.sqrt(len(slopes)))
        return float(slopes.mean()), hw, f"seed-to-seed over {r.shape[0]} seeds"
    y = r[0]
    if lx.size < 3:
        return log_slope(x, np.exp(y)), math.inf, "2 points: no interval"
    (b, a) = np.polyfit(lx, y, 1)
    resid = y - (a + b * lx)
    sxx = float(((lx - lx.mean()) ** 2).sum())
    se = math.sqrt(float((resid ** 2).sum()) / (lx.size - 2) / sxx)
    return float(b), float(stats.t.ppf(q, lx.size - 2) * se), (
        f"from the fit's residuals ({lx.size} points, one seed)")


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
                  grid: Any = None, name: str = "x", explicit: bool = False,
                  next_gap: float = NEXT_RATE_GAP, slope_tolerance: float = SLOPE_TOLERANCE
                  ) -> tuple[str, float, str, dict[str, Any]]:
    """``(verdict, statistic, line, info)`` by the rules of the module docstring: verdict
    ``"HOLDS"``, ``"FAILS"`` or ``"INCONCLUSIVE"``; statistic = the rise (upper) or the spread
    (exact) compared with ``factor``; info: ``C`` (the constant with measured ≤ C · shape on
    the whole grid), ``C_min``, ``ratios``, ``claim``, and with a grid the slopes, the slope
    gap's interval and the ``resolution``.  ``measured`` (and ``shape``) may hold one row per
    seed (``[seeds, points]``): the rise and spread rules read the mean over seeds, the slope
    interval is seed-to-seed."""
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    m2 = np.atleast_2d(np.asarray(measured, dtype=float))
    g2 = np.atleast_2d(np.asarray(shape, dtype=float))
    if m2.ndim != 2 or g2.ndim != 2 or g2.shape[0] not in (1, m2.shape[0]) \
            or m2.shape[1] != g2.shape[1] or m2.shape[1] < 2:
        raise ValueError(f"envelope needs >= 2 grid points of equal length, got "
                         f"{m2.shape} measured and {g2.shape} shape values")
    if not (np.all(np.isfinite(m2)) and np.all(np.isfinite(g2)) and np.all(m2 > 0)
            and np.all(g2 > 0)):
        raise ValueError("envelope needs finite positive measured and shape values")
    if not (math.isfinite(factor) and factor >= 1):
        raise ValueError(f"envelope factor must be a finite number >= 1, got {factor!r}")
    m, g = m2.mean(axis=0), g2.mean(axis=0)
    ratio = m / g
    info: dict[str, Any] = {"C": float(ratio.max()), "C_min": float(ratio.min()),
                            "ratios": ratio.tolist(), "claim": claim, "seeds": m2.shape[0]}
    half = math.ceil(m.size / 2)
    if claim == "exact":
        stat = float(ratio.max() / ratio.min())
        info["spread"] = stat
        verdict = "HOLDS" if stat <= factor else "FAILS"
        line = (f"Θ claim (two-sided): measured/shape spread {stat:.3g} <= factor {factor:g}? "
                f"implied C = {ratio.max():.4g} (min {ratio.min():.4g}) over {m.size} grid "
                f"points")
    else:
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
        verdict, more = _slope_rule(verdict, x, m2 / g2, info, factor=factor, claim=claim,
                                    name=name, half=half, next_gap=next_gap,
                                    tol=slope_tolerance)
        line += more
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


def _slope_rule(verdict: str, x: np.ndarray, ratios: np.ndarray, info: dict[str, Any], *,
                factor: float, claim: str, name: str, half: int, next_gap: float, tol: float
                ) -> tuple[str, str]:
    """The slope-gap test and the resolution of the module docstring, applied on top of the
    rise (or spread) rule's ``verdict``; returns the new verdict and the text to append."""
    gap, hw, how = slope_gap_interval(x, ratios)
    lo, hi = gap - hw, gap + hw
    span = x[-1] / (x[half - 1] if claim == "upper" else x[0])
    rise_res = math.log(factor) / math.log(span) if span > 1 else math.inf
    resolution = min(tol + hw, rise_res)
    info.update(slope_gap=gap, slope_gap_ci=[lo, hi], slope_ci_how=how, resolution=resolution,
                next_gap=next_gap, slope_tolerance=tol)
    text = (f"; slope gap {gap:+.3f} [{lo:+.3f}, {hi:+.3f}] ({LEVEL:.0%}, {how}) vs "
            f"tolerance {tol:g}; resolution {resolution:.3g} in the exponent of {name} "
            f"(next plausible rate {next_gap:g} away)")
    if claim == "upper":
        if lo > tol:
            return "FAILS", text + (f": the measurement decays slower than the bound beyond "
                                    f"the tolerance and the noise")
        tail = max(3, x.size - half)
        if x.size > tail:  # the asymptotic rate is the tail's: a high first point can hide it
            t_gap, t_hw, _ = slope_gap_interval(x[-tail:], ratios[:, -tail:])
            info.update(tail_slope_gap=t_gap, tail_slope_gap_ci=[t_gap - t_hw, t_gap + t_hw])
            if t_gap - t_hw > tol:
                return "FAILS", text + (f"; over the last {tail} points alone the slope gap is "
                                        f"{t_gap:+.3f} [{t_gap - t_hw:+.3f}, {t_gap + t_hw:+.3f}]"
                                        f": the tail decays slower than the bound beyond the "
                                        f"tolerance and the noise")
    else:
        if lo > tol or hi < -tol:
            return "FAILS", text + ": the slopes differ beyond the tolerance and the noise"
    if verdict == "HOLDS" and not resolution < next_gap:
        return "INCONCLUSIVE", text + (f": the grid is too short to tell {name}^a from "
                                       f"{name}^(a±{next_gap:g}) (resolution {resolution:.3g} "
                                       f">= {next_gap:g})")
    return verdict, text
