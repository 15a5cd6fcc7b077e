"""Benchmark: PPFE's number of stages T̂ from each selector against the best T.

PPFE (Emrani, Najafi, Motahari 2026), §5 "Bias–Variance Tradeoff" (docs/formulas.md §C.5.12)
on the linear generator of §6.1 (:mod:`synthetic.linear`, eqs. 15–16) with the linear PPFE
of :mod:`algorithms.ppfe_linear` (stage 0 federated ridge, stages 1 … T−1 personal ridge on
residuals, λ's tuned on a 20 % validation split).  For every configuration (α, N, n, d) and
seed, PPFE is fitted for T = 1 … ``t_max``; the **best T** minimises the exact population
MSE σ_ε² + (ŵ_i − w_i)ᵀΣ_i(ŵ_i − w_i) averaged over clients and seeds (smallest T on ties).
Selectors (per seed):

* ``bound`` — :func:`pfl_theory.ppfe_bounds.select_stages` with its inputs **estimated from
  the data** of the T = ``t_max`` fit (selection-time fits, before the refit): the bias
  e^{−2γ²T} is matched to the normalised training MSE r_t = MSE_train(t)/MSE_train(0)
  (least squares of log r_t = −2γ²t through the origin, γ̂ clipped to (0.01, 0.49)), and
  the variance κ₀√(T/n) to the normalised generalisation gap (MSE_val(t) − MSE_train(t))/
  MSE_train(0) (least squares through the origin, κ̂₀ ≥ 1e-6); n = training part per client.
* ``validation`` — T̂ minimises the validation MSE of the fitted ensemble (the paper's
  "or by cross-validation"; the split PPFE already holds out for its λ's, so it is optimistic).
* ``cv`` — nested ``CV_FOLDS``-fold cross-validation: each client's training data is cut
  into folds (seeded); for every fold and T, PPFE (with its own λ tuning) is fitted on the
  other folds and scored on the fold; T̂ minimises the pooled held-out MSE.
* ``cv_1se`` — the same per-sample held-out errors with the one-standard-error rule
  (:func:`verification.stage_selectors.one_se_pick`): the smallest T within one SE.
* ``paper_T4`` — the paper's fixed T = 4.

"Accuracy lost" for regression: the relative excess population MSE of T̂ over the best T
(``lost_le_1pt`` counts excess ≤ 1 %).  Beside the strict best T every record carries the
noise-aware set (:func:`verification.stage_selectors.noise_aware_best`: the T within the
seed-to-seed standard error of the best) and ``exact_na`` / ``within1_na`` against it.
``python -m verification.selection_stages [--full] [--seeds S]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time

import numpy as np

from algorithms.ppfe_linear import _split, fit_ppfe_linear  # _split: PPFE's own validation split
from pfl_theory.ppfe_bounds import select_stages
from pfl_theory.threads import single_blas_thread
from synthetic.linear import make_linear_federation, population_mse
from verification import stage_selectors as sel_

__all__ = ["STAGE_SELECTORS", "quick_configs", "full_configs", "estimate_stage_inputs",
           "cv_losses", "run_config", "run_stage_benchmark", "summarise_stages"]

STAGE_SELECTORS = ("bound", "validation", "cv", "cv_1se", "paper_T4")
T_MAX = 6
VAL_FRACTION = 0.2
CV_FOLDS = 5
SEEDS = 3


def quick_configs() -> list[dict]:
    return [dict(alpha=0.3, num_clients=20, n_train=40, dim=20),
            dict(alpha=0.8, num_clients=50, n_train=100, dim=20)]


def full_configs() -> list[dict]:
    """α ∈ {0, 0.3, 0.6, 1, uniform} × N ∈ {10, 50, 200} × (n, d) ∈ {(40, 20), (100, 50)}:
    30 configurations."""
    return [dict(alpha=a, num_clients=n_c, n_train=n, dim=d)
            for a, n_c, (n, d) in itertools.product((0.0, 0.3, 0.6, 1.0, "uniform"), (10, 50, 200),
                                                    ((40, 20), (100, 50)))]


def _mse(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.mean((y - np.einsum("ncd,nd->nc", x, w)) ** 2, axis=1)


def estimate_stage_inputs(fed, *, t_max: int = T_MAX, seed: int = 0) -> dict:
    """γ̂, κ̂₀ and n of the bias–variance bound from a T = ``t_max`` PPFE fit (module
    docstring, :func:`verification.stage_selectors.fit_bound_inputs`), with the normalised
    training and validation curves they were fitted to."""
    fit = fit_ppfe_linear(fed, num_stages=t_max, refit=False, seed=seed,
                          val_fraction=VAL_FRACTION)
    tr, va = _split(fed.x_train.shape[1], fed.num_clients, VAL_FRACTION, seed)
    rows = np.arange(fed.num_clients)[:, None]
    xt, yt, xv, yv = fed.x_train[rows, tr], fed.y_train[rows, tr], fed.x_train[rows, va], fed.y_train[rows, va]
    base = float(np.mean(yt ** 2))   # MSE of the trivial predictor 0
    train = np.array([_mse(xt, yt, fit.partial_weights(t)).mean() for t in range(1, t_max + 1)]) / base
    val = np.array([_mse(xv, yv, fit.partial_weights(t)).mean() for t in range(1, t_max + 1)]) / base
    out = sel_.fit_bound_inputs(train, val, float(tr.shape[1]))
    return {**out, "train_curve": train.tolist(), "val_curve": val.tolist()}


def cv_losses(fed, *, t_max: int = T_MAX, seed: int = 0, folds: int = CV_FOLDS) -> np.ndarray:
    """Held-out squared errors ``[t_max, N·n]`` of nested ``folds``-fold cross-validation:
    every training sample is predicted once by the PPFE fitted (λ's tuned inside) on the
    other folds of its client, for each T = 1 … t_max."""
    n_clients, n, _ = fed.x_train.shape
    if not 2 <= folds <= n // 2:
        raise ValueError(f"folds must be in [2, n/2] = [2, {n // 2}], got {folds}")
    rng = np.random.default_rng(1_000_003 + seed)
    fold_of = np.empty((n_clients, n), dtype=np.int64)
    rows = np.arange(n_clients)[:, None]
    fold_of[rows, np.argsort(rng.random((n_clients, n)), axis=1)] = np.arange(n) % folds
    out = np.zeros((t_max, n_clients, n))
    for f in range(folds):
        held = np.nonzero(fold_of == f)[1].reshape(n_clients, -1)   # equal count per client
        kept = np.nonzero(fold_of != f)[1].reshape(n_clients, -1)
        sub = dataclasses.replace(fed, x_train=fed.x_train[rows, kept], y_train=fed.y_train[rows, kept])
        xh, yh = fed.x_train[rows, held], fed.y_train[rows, held]
        for t in range(1, t_max + 1):
            w = fit_ppfe_linear(sub, num_stages=t, seed=seed, val_fraction=VAL_FRACTION).weights
            out[t - 1, rows, held] = (yh - np.einsum("ncd,nd->nc", xh, w)) ** 2
    return out.reshape(t_max, -1)


def run_config(config: dict, *, seeds: int = SEEDS, t_max: int = T_MAX, seed_offset: int = 0,
               cv_folds: int = CV_FOLDS) -> dict:
    """Population MSE for T = 1 … t_max per seed (data and splits seeded by
    ``seed_offset + s``), best T (strict and noise-aware), and each selector's T̂."""
    risk = np.zeros((seeds, t_max))
    picks = []
    for s in range(seed_offset, seed_offset + seeds):
        fed = make_linear_federation(seed=s, **config)
        val = np.zeros(t_max)
        for t in range(1, t_max + 1):
            fit = fit_ppfe_linear(fed, num_stages=t, seed=s, val_fraction=VAL_FRACTION)
            risk[s - seed_offset, t - 1] = population_mse(fed, fit.weights).mean()
            val[t - 1] = fit.val_mse[-1]
        inputs = estimate_stage_inputs(fed, t_max=t_max, seed=s)
        sel = select_stages(gamma=inputs["gamma"], kappa0=inputs["kappa0"], n=inputs["n"],
                            t_max=t_max)
        cv = cv_losses(fed, t_max=t_max, seed=s, folds=cv_folds)
        picks.append({"bound": sel.t_star, "validation": int(np.argmin(val)) + 1,
                      "cv": int(np.argmin(cv.mean(1))) + 1, "cv_1se": sel_.one_se_pick(cv),
                      "paper_T4": min(4, t_max), "_inputs": inputs})
    best, close, recs = sel_.records(risk, picks, config=config, relative=True)
    return {"config": config, "risk": risk.tolist(), "best_t": best, "near_best": close,
            "records": recs, "inputs": [p["_inputs"] for p in picks]}


def run_stage_benchmark(configs, *, seeds: int = SEEDS, seed_offset: int = 0,
                        cv_folds: int = CV_FOLDS, progress: bool = False) -> list[dict]:
    """:func:`run_config` for every configuration with numpy's BLAS on one thread (the
    batched solves are small; several threads only contend on shared cores)."""
    out = []
    with single_blas_thread():
        for i, c in enumerate(configs):
            out.append(run_config(c, seeds=seeds, seed_offset=seed_offset, cv_folds=cv_folds))
            if progress:
                print(f"[{i + 1}/{len(configs)}] {c}: best T {out[-1]['best_t']} "
                      f"(within the seed SE: {out[-1]['near_best']})", flush=True)
    return out


def summarise_stages(results: list[dict], *, tolerance: float = 0.01) -> dict[str, dict]:
    """Per selector: fraction exact, within ±1, the same against the noise-aware set,
    excess risk ≤ ``tolerance`` (relative), mean and max excess, number of records."""
    recs = [r for res in results for r in res["records"]]
    return sel_.summarise(recs, STAGE_SELECTORS + sel_.REFERENCES, tolerance=tolerance)


def print_table(summary: dict[str, dict], *, unit: str = "%", scale: float = 100.0) -> None:
    print(f"{'selector':<15}{'exact':>7}{'±1':>6}{'exact~':>8}{'±1~':>6}{'≤1' + unit:>7}"
          f"{'mean':>8}{'max':>8}   (~: against the noise-aware set of best T)")
    for name, s in summary.items():
        print(f"{name:<15}{s['exact']:>7.2f}{s['within1']:>6.2f}{s['exact_na']:>8.2f}"
              f"{s['within1_na']:>6.2f}{s['lost_le_1pt']:>7.2f}{scale * s['mean_lost']:>8.2f}"
              f"{scale * s['max_lost']:>8.2f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full grid (30 configurations)")
    p.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per configuration (default {SEEDS})")
    p.add_argument("--cv-folds", type=int, default=CV_FOLDS, help=f"folds of cv (default {CV_FOLDS})")
    p.add_argument("--save", default=None, metavar="FILE", help="write the results as JSON")
    a = p.parse_args(argv)
    t0 = time.time()
    res = run_stage_benchmark(full_configs() if a.full else quick_configs(), seeds=a.seeds,
                              cv_folds=a.cv_folds, progress=True)
    if a.save:
        import json
        with open(a.save, "w") as f:
            json.dump(res, f, default=str)
    print_table(summarise_stages(res))
    print(f"{len(res)} configurations × {a.seeds} seeds, {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
