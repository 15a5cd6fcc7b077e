"""Stage-count selectors and agreement metrics shared by the PPFE stage benchmarks.

Used by :mod:`verification.selection.stages_linear` (linear generator, exact population risk) and
:mod:`verification.selection.stages_nn` (MLP PPFE, test accuracy).  Everything works on a
*loss* curve over T = 1 … t_max (population MSE, or 1 − accuracy), smaller is better.

* :func:`fit_bound_inputs` — γ̂, κ̂₀ of PPFE §5's bias–variance bound Φ(T) = e^{−2γ²T} + κ₀√(T/n)
  (docs/formulas.md §C.5.12) fitted to a run's normalised training and validation curves:
  least squares of log r_t = −2γ²t through the origin (r_t = training loss of the T = t
  ensemble / loss of the trivial predictor; γ̂ clipped to (0.01, 0.49)), and of the
  normalised generalisation gap (val_t − train_t)/base = κ₀√(t/n) through the origin
  (κ̂₀ ≥ 1e-6).  [Toolkit estimator: the paper gives no way to estimate γ or κ₀.]
* :func:`one_se_pick` — the one-standard-error rule (Breiman et al. 1984, §3.4.3; Hastie,
  Tibshirani, Friedman, ESL §7.10): the smallest T whose mean held-out loss exceeds the
  minimum by at most the standard error of the *paired* per-sample difference to the minimiser.
* :func:`fit_bound_curve` — the bound's shape fitted to a held-out (cross-validation) loss
  curve: L(T) ≈ c + b·e^{−2γ²T} + b·κ₀√(T/n) (c ≥ 0 the irreducible loss, b > 0 a scale),
  non-negative least squares in (c, b, bκ₀) for every γ of a grid in [0.01, 0.49], the γ of
  least residual kept.  Its T* (:func:`pfl_theory.ppfe_bounds.select_stages`, invariant to c
  and b) is the bound's choice with inputs estimated by cross-validation.  [Toolkit estimator.]
* :func:`noise_aware_best` — the set of T that cannot be told apart from the strict best T
  by the benchmark's own seeds: mean loss above the best by at most the seed-to-seed
  standard error of the paired difference (std over seeds, ddof = 1, / √S).  Reported
  BESIDE the strict argmax, never instead of it.
* :func:`records` / :func:`summarise` — per (configuration, seed, selector): exact, ±1, the
  noise-aware versions, and the loss of T̂ against the strict best T.
"""

from __future__ import annotations

import numpy as np

from pfl_theory.ppfe_bounds import GAMMA_MAX

__all__ = ["REFERENCES", "fit_bound_inputs", "fit_bound_curve", "one_se_pick",
           "noise_aware_best", "records", "summarise"]


def fit_bound_inputs(train: np.ndarray, val: np.ndarray, n: float) -> dict:
    """γ̂ and κ̂₀ (module docstring) from the normalised curves ``train[t-1]``, ``val[t-1]``
    of the T = t ensembles, t = 1 … t_max (each already divided by the trivial loss)."""
    train, val = np.asarray(train, dtype=np.float64), np.asarray(val, dtype=np.float64)
    if train.shape != val.shape or train.ndim != 1 or train.size == 0:
        raise ValueError(f"train and val must be equal-length 1-D curves, got {train.shape}, {val.shape}")
    if not (np.all(np.isfinite(train)) and np.all(np.isfinite(val))) or n <= 0:
        raise ValueError("train/val curves must be finite and n > 0")
    t = np.arange(1, train.size + 1, dtype=np.float64)
    logr = np.log(np.clip(train, 1e-12, None))
    gamma2 = float(-(t * logr).sum() / (2 * (t * t).sum()))
    gamma = float(np.clip(np.sqrt(max(gamma2, 0.0)), 0.01, GAMMA_MAX))
    root = np.sqrt(t / n)
    kappa0 = float(max(((val - train) * root).sum() / (root * root).sum(), 1e-6))
    return {"gamma": gamma, "kappa0": kappa0, "n": float(n)}


def fit_bound_curve(loss: np.ndarray, n: float, *, grid: int = 49) -> dict:
    """γ̂, κ̂₀, n, c, b (module docstring) fitted to the mean held-out loss ``loss[t-1]``
    of T = t = 1 … t_max; ``grid`` values of γ, evenly spaced in [0.01, GAMMA_MAX].  With
    t_max ≤ 3 the fit is not determined (3 coefficients); NNLS returns one of its solutions."""
    from scipy.optimize import nnls

    y = np.asarray(loss, dtype=np.float64)
    if y.ndim != 1 or y.size < 1 or not np.all(np.isfinite(y)) or not n > 0:
        raise ValueError(f"loss must be a finite non-empty 1-D curve and n > 0, got {y.shape}, n={n}")
    t = np.arange(1, y.size + 1, dtype=np.float64)
    best = None
    for g in np.linspace(0.01, GAMMA_MAX, grid):
        a = np.stack([np.ones_like(t), np.exp(-2 * g * g * t), np.sqrt(t / n)], axis=1)
        coef, res = nnls(a, y)
        if best is None or res < best[0] - 1e-15:
            best = (res, float(g), coef)
    _, g, (c, b, bk) = best
    # b = 0: no decay in the curve — the bias term is absent, κ̂₀ is unbounded; report a large one
    kappa0 = float(max(bk / b, 1e-6)) if b > 0 else 1e6
    return {"gamma": g, "kappa0": kappa0, "n": float(n), "c": float(c), "b": float(b)}


def one_se_pick(losses: np.ndarray) -> int:
    """One-SE rule on per-sample held-out losses ``losses [t_max, M]`` (the same M samples
    for every T, so differences are paired): T̂ = the smallest T with
    mean(ℓ_T − ℓ_T*) ≤ sd(ℓ_T − ℓ_T*)/√M, T* = argmin of the mean loss."""
    l = np.asarray(losses, dtype=np.float64)
    if l.ndim != 2 or l.shape[1] < 2:
        raise ValueError(f"losses must be [t_max, M] with M >= 2 samples, got {l.shape}")
    best = int(np.argmin(l.mean(1)))
    d = l - l[best]
    se = d.std(1, ddof=1) / np.sqrt(l.shape[1])
    return int(np.flatnonzero(d.mean(1) <= se + 1e-15)[0]) + 1


def noise_aware_best(loss: np.ndarray) -> tuple[int, list[int], np.ndarray]:
    """``(strict best T, noise-aware set of T, standard errors [t_max])`` from the loss
    ``loss [S, t_max]`` of S ≥ 2 seeds (module docstring; strict best = argmin of the seed
    mean, smallest T on ties)."""
    l = np.asarray(loss, dtype=np.float64)
    if l.ndim != 2 or l.shape[0] < 2:
        raise ValueError(f"loss must be [seeds >= 2, t_max], got {l.shape}")
    mean = l.mean(0)
    best = int(np.argmin(mean))
    d = l - l[:, best:best + 1]
    se = d.std(0, ddof=1) / np.sqrt(l.shape[0])
    close = [int(t) + 1 for t in np.flatnonzero(d.mean(0) <= se + 1e-15)]
    return best + 1, close, se


REFERENCES = ("oracle_seed",)


def records(loss: np.ndarray, picks: list[dict], *, config: dict, relative: bool) -> tuple[int, list[int], list[dict]]:
    """Agreement records of every selector's T̂ (``picks[s][name]``, seed s) against the
    best T of the seed-mean ``loss [S, t_max]``.  ``lost`` = relative excess loss
    (``relative``, regression) or the absolute difference (accuracy as a fraction).
    A reference no selector can use is added (:data:`REFERENCES`): ``oracle_seed`` = the
    argmin of seed s's own loss (the best T of that very data draw) — how well the seed-mean
    best T is defined at all.  (The best T of *another* draw, s + 1, gives the same summary:
    over all seeds it is the same multiset of picks.)"""
    best, close, _ = noise_aware_best(loss)
    l = np.asarray(loss, dtype=np.float64)
    mean = l.mean(0)
    picks = [{**p, "oracle_seed": int(np.argmin(l[s])) + 1} for s, p in enumerate(picks)]
    out = []
    for s, p in enumerate(picks):
        for name, t_hat in p.items():
            if name.startswith("_"):
                continue
            diff = mean[t_hat - 1] - mean[best - 1]
            lost = diff / mean[best - 1] if relative else diff
            out.append({"config": dict(config), "seed": s, "selector": name, "t_hat": int(t_hat),
                        "best_t": best, "near_best": close, "exact": t_hat == best,
                        "within1": abs(t_hat - best) <= 1, "exact_na": t_hat in close,
                        "within1_na": min(abs(t_hat - c) for c in close) <= 1,
                        "excess": float(lost)})
    return best, close, out


def summarise(recs: list[dict], selectors, *, tolerance: float) -> dict[str, dict]:
    """Per selector: fractions exact, ±1, exact / ±1 to the noise-aware set (``*_na``),
    loss ≤ ``tolerance``; mean and max loss; number of records."""
    out = {}
    for name in selectors:
        rs = [r for r in recs if r["selector"] == name]
        if not rs:
            continue
        ex = np.array([r["excess"] for r in rs])
        out[name] = {k: float(np.mean([r[k] for r in rs]))
                     for k in ("exact", "within1", "exact_na", "within1_na")}
        out[name].update(lost_le_1pt=float(np.mean(ex <= tolerance + 1e-12)),
                         mean_lost=float(ex.mean()), max_lost=float(ex.max()), records=len(rs))
    return out
