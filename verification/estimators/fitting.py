"""Rate fitting: log–log slopes with a bootstrap confidence interval over seeds.

A *rate check* measures a quantity ``y`` (an error, a gradient norm, a gap) at several
sizes ``x`` (rounds ``T``, samples ``m``, clients ``N``…) for several seeds, and compares the
fitted exponent ``b`` of ``y ≈ a · x^b`` with the exponent a theorem predicts.

Model (per seed ``s``)::

    log y[s, j] = log a_s + b_s · log x[j] + noise         (ordinary least squares)

* point estimate: ``slope = mean_s b_s`` — identical to the OLS slope of the seed-averaged
  ``log y`` because OLS with a common design is linear in the response;
* confidence interval: percentile bootstrap over seeds — resample the seeds with
  replacement ``n_boot`` times, average their slopes, take the ``(1 ± level)/2`` quantiles.
  With a single seed there is nothing to resample across seeds, so the points are resampled
  instead (pairs bootstrap over ``x``; resamples with fewer than two distinct ``x`` are
  redrawn). ``SlopeFit.method`` records which was used.

Everything is deterministic given ``seed`` (a :func:`numpy.random.default_rng` seed).

:func:`rate_verdict` turns an interval into a verdict: a claim ``slope = predicted`` is
refuted only when the interval, widened by ``tol`` on both sides, excludes ``predicted``;
one-sided claims (``slope ≤ predicted`` / ``slope ≥ predicted``) are refuted only when the
whole widened interval lies on the wrong side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pfl_theory.validation import in_open_unit, nonnegative, positive_int

CLAIMS = ("equal", "at_most", "at_least")


@dataclass(frozen=True)
class SlopeFit:
    """Result of :func:`fit_loglog`. ``seed_slopes``/``seed_intercepts`` have one entry per
    seed (row of ``y``); the intercept is ``log a`` (natural log)."""

    slope: float
    intercept: float
    ci_low: float
    ci_high: float
    seed_slopes: np.ndarray
    seed_intercepts: np.ndarray
    level: float
    n_boot: int
    method: str  # "seeds" (bootstrap over seeds) or "points" (single seed, pairs bootstrap)

    @property
    def ci(self) -> tuple[float, float]:
        return (self.ci_low, self.ci_high)

    def predict(self, x: Any) -> np.ndarray:
        """``exp(intercept) · x^slope`` — the fitted power law, e.g. for plotting."""
        return np.exp(self.intercept) * np.asarray(x, dtype=np.float64) ** self.slope

    def to_dict(self) -> dict[str, Any]:
        return {"slope": self.slope, "intercept": self.intercept, "ci_low": self.ci_low,
                "ci_high": self.ci_high, "seed_slopes": self.seed_slopes.tolist(),
                "level": self.level, "n_boot": self.n_boot, "method": self.method}


@dataclass(frozen=True)
class RateComparison:
    """Result of :func:`rate_verdict`; truthy iff the claim holds. ``distance`` is how far
    ``predicted`` lies outside the (unwidened) interval on the refuting side (0 if inside)."""

    holds: bool
    distance: float
    detail: str

    def __bool__(self) -> bool:
        return self.holds


def _ols(logx: np.ndarray, logy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise OLS of ``logy[..., j]`` on ``logx[..., j]``; returns (slopes, intercepts)."""
    mx = logx.mean(axis=-1, keepdims=True)
    my = logy.mean(axis=-1, keepdims=True)
    dx = logx - mx
    slopes = (dx * (logy - my)).sum(axis=-1) / (dx * dx).sum(axis=-1)
    intercepts = my[..., 0] - slopes * mx[..., 0]
    return slopes, intercepts


def _validate(x: Any, y: Any, min_points: int) -> tuple[np.ndarray, np.ndarray]:
    xs = np.asarray(x, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    if xs.ndim != 1:
        raise ValueError(f"x must be one-dimensional, got shape {xs.shape}")
    if ys.ndim == 1:
        ys = ys[None, :]
    if ys.ndim != 2 or ys.shape[1] != xs.shape[0]:
        raise ValueError(f"y must have shape [seeds, len(x)] = [*, {xs.shape[0]}], "
                         f"got {np.shape(y)}")
    if ys.shape[0] < 1:
        raise ValueError("y needs at least one seed (row)")
    for name, arr in (("x", xs), ("y", ys)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} contains NaN or inf")
        if np.any(arr <= 0):
            raise ValueError(f"{name} must be > 0 for a log–log fit, got min {arr.min()!r}")
    n_distinct = np.unique(xs).size
    if n_distinct < min_points:
        raise ValueError(f"a log–log fit needs at least {min_points} distinct x values, "
                         f"got {n_distinct}")
    return xs, ys


def fit_loglog(x: Any, y: Any, *, level: float = 0.95, n_boot: int = 2000, seed: int = 0,
               min_points: int = 3) -> SlopeFit:
    """Fit ``y ≈ a·x^b`` in log–log space with a bootstrap confidence interval over seeds.

    Args:
        x: the sizes, shape ``[m]``, all > 0 (at least ``min_points`` distinct values).
        y: the measurements, shape ``[seeds, m]`` (a 1-D ``[m]`` array is one seed), > 0.
        level: confidence level of the interval, in (0, 1).
        n_boot: number of bootstrap resamples (>= 1).
        seed: seed of the bootstrap's random generator; same seed ⇒ same interval.
        min_points: minimum number of distinct ``x`` (>= 2; default 3 so that a straight
            line in log–log space is actually tested, not just drawn through two points).

    Returns:
        :class:`SlopeFit` with the mean slope/intercept over seeds and the percentile CI.
    """
    level = in_open_unit("level", level)
    n_boot = positive_int("n_boot", n_boot)
    min_points = positive_int("min_points", min_points, minimum=2)
    seed = positive_int("seed", seed, minimum=0)
    xs, ys = _validate(x, y, min_points)
    logx, logy = np.log(xs), np.log(ys)
    seed_slopes, seed_intercepts = _ols(logx[None, :], logy)
    rng = np.random.default_rng(seed)
    n_seeds, m = ys.shape
    if n_seeds >= 2:
        method = "seeds"
        idx = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
        boot = seed_slopes[idx].mean(axis=1)  # slope of the mean log y = mean of slopes
    else:
        method = "points"
        idx = rng.integers(0, m, size=(n_boot, m))
        degenerate = (xs[idx] == xs[idx[:, :1]]).all(axis=1)  # one distinct x: no slope
        while degenerate.any():  # redraw those resamples
            idx[degenerate] = rng.integers(0, m, size=(int(degenerate.sum()), m))
            degenerate = (xs[idx] == xs[idx[:, :1]]).all(axis=1)
        boot, _ = _ols(logx[idx], logy[0][idx])
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot, [alpha, 1.0 - alpha])
    return SlopeFit(slope=float(seed_slopes.mean()), intercept=float(seed_intercepts.mean()),
                    ci_low=float(lo), ci_high=float(hi), seed_slopes=seed_slopes,
                    seed_intercepts=seed_intercepts, level=level, n_boot=n_boot,
                    method=method)


def rate_verdict(ci: SlopeFit | tuple[float, float], predicted: float, *, tol: float,
                 claim: str = "equal") -> RateComparison:
    """Compare a slope confidence interval with a predicted exponent.

    Args:
        ci: a :class:`SlopeFit` or an interval ``(low, high)`` with ``low <= high``.
        predicted: the exponent the theory predicts (e.g. ``-0.5`` for ``1/sqrt(T)``).
        tol: extra slack (>= 0) on the exponent, for pre-asymptotic bias the interval does
            not capture; the caller states its reason next to the check's tolerance.
        claim: ``"equal"`` (slope = predicted), ``"at_most"`` (slope <= predicted, e.g. a
            rate at least as fast as an upper bound says) or ``"at_least"``.

    Returns:
        :class:`RateComparison` (truthy iff the claim survives the measurement).
    """
    if isinstance(ci, SlopeFit):
        lo, hi = ci.ci_low, ci.ci_high
    else:
        try:
            lo, hi = (float(v) for v in ci)
        except (TypeError, ValueError):
            raise ValueError(f"ci must be a SlopeFit or a (low, high) pair, got {ci!r}") \
                from None
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise ValueError(f"ci must be a finite interval with low <= high, got ({lo}, {hi})")
    predicted = float(predicted)
    if not np.isfinite(predicted):
        raise ValueError(f"predicted must be finite, got {predicted!r}")
    tol = nonnegative("tol", tol)
    if claim not in CLAIMS:
        raise ValueError(f"claim must be one of {CLAIMS}, got {claim!r}")
    above = max(lo - predicted, 0.0)  # interval lies above the prediction by this much
    below = max(predicted - hi, 0.0)  # interval lies below the prediction by this much
    distance = {"equal": max(above, below), "at_most": above, "at_least": below}[claim]
    holds = distance <= tol
    relation = {"equal": "=", "at_most": "<=", "at_least": ">="}[claim]
    detail = (f"slope CI [{lo:.4g}, {hi:.4g}] vs claim slope {relation} {predicted:.4g} "
              f"(tol {tol:.3g}): {'consistent' if holds else 'refuted'}"
              + ("" if distance == 0 else f", off by {distance:.3g}"))
    return RateComparison(holds=holds, distance=float(distance), detail=detail)
