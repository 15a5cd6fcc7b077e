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
  "or by cross-validation"; the split PPFE already holds out for its λ's).
* ``paper_T4`` — the paper's fixed T = 4.

"Accuracy lost" for regression: the relative excess population MSE of T̂ over the best T
(``lost_le_1pt`` counts excess ≤ 1 %).  ``python -m verification.selection_stages [--full]``.
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np

from algorithms.ppfe_linear import _split, fit_ppfe_linear  # _split: PPFE's own validation split
from pfl_theory.ppfe_bounds import select_stages
from pfl_theory.threads import single_blas_thread
from synthetic.linear import make_linear_federation, population_mse

__all__ = ["STAGE_SELECTORS", "quick_configs", "full_configs", "estimate_stage_inputs",
           "run_config", "run_stage_benchmark", "summarise_stages"]

STAGE_SELECTORS = ("bound", "validation", "paper_T4")
T_MAX = 6
VAL_FRACTION = 0.2


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
    docstring), with the normalised training and validation curves they were fitted to."""
    fit = fit_ppfe_linear(fed, num_stages=t_max, refit=False, seed=seed,
                          val_fraction=VAL_FRACTION)
    tr, va = _split(fed.x_train.shape[1], fed.num_clients, VAL_FRACTION, seed)
    rows = np.arange(fed.num_clients)[:, None]
    xt, yt, xv, yv = fed.x_train[rows, tr], fed.y_train[rows, tr], fed.x_train[rows, va], fed.y_train[rows, va]
    base = float(np.mean(yt ** 2))
    train = np.array([_mse(xt, yt, fit.partial_weights(t)).mean() for t in range(1, t_max + 1)]) / base
    val = np.array([_mse(xv, yv, fit.partial_weights(t)).mean() for t in range(1, t_max + 1)]) / base
    t = np.arange(1, t_max + 1, dtype=np.float64)
    logr = np.log(np.clip(train, 1e-12, None))
    gamma2 = float(-(t * logr).sum() / (2 * (t * t).sum()))
    gamma = float(np.clip(np.sqrt(max(gamma2, 0.0)), 0.01, 0.49))
    n = float(tr.shape[1])
    root = np.sqrt(t / n)
    kappa0 = float(max(((val - train) * root).sum() / (root * root).sum(), 1e-6))
    return {"gamma": gamma, "kappa0": kappa0, "n": n, "train_curve": train.tolist(),
            "val_curve": val.tolist()}


def run_config(config: dict, *, seeds: int = 2, t_max: int = T_MAX) -> dict:
    """Population MSE for T = 1 … t_max per seed, best T, and each selector's T̂."""
    risk = np.zeros((seeds, t_max))
    picks = []
    for s in range(seeds):
        fed = make_linear_federation(seed=s, **config)
        val = np.zeros(t_max)
        for t in range(1, t_max + 1):
            fit = fit_ppfe_linear(fed, num_stages=t, seed=s, val_fraction=VAL_FRACTION)
            risk[s, t - 1] = population_mse(fed, fit.weights).mean()
            val[t - 1] = fit.val_mse[-1]
        inputs = estimate_stage_inputs(fed, t_max=t_max, seed=s)
        sel = select_stages(gamma=inputs["gamma"], kappa0=inputs["kappa0"], n=inputs["n"],
                            t_max=t_max)
        picks.append({"bound": sel.t_star, "validation": int(np.argmin(val)) + 1,
                      "paper_T4": min(4, t_max), "_inputs": inputs})
    mean = risk.mean(0)
    best = int(np.argmin(mean)) + 1
    records = []
    for s, p in enumerate(picks):
        for name in STAGE_SELECTORS:
            t_hat = p[name]
            records.append({"config": {k: v for k, v in config.items()}, "seed": s,
                            "selector": name, "t_hat": t_hat, "best_t": best,
                            "exact": t_hat == best, "within1": abs(t_hat - best) <= 1,
                            "excess": float(mean[t_hat - 1] / mean[best - 1] - 1.0)})
    return {"config": config, "risk": risk.tolist(), "best_t": best, "records": records,
            "inputs": [p["_inputs"] for p in picks]}


def run_stage_benchmark(configs, *, seeds: int = 2, progress: bool = False) -> list[dict]:
    """:func:`run_config` for every configuration with numpy's BLAS on one thread (the
    batched solves are small; several threads only contend on shared cores)."""
    out = []
    with single_blas_thread():
        for i, c in enumerate(configs):
            out.append(run_config(c, seeds=seeds))
            if progress:
                print(f"[{i + 1}/{len(configs)}] {c}: best T {out[-1]['best_t']}", flush=True)
    return out


def summarise_stages(results: list[dict], *, tolerance: float = 0.01) -> dict[str, dict]:
    """Per selector: fraction exact, within ±1, excess risk ≤ ``tolerance`` (relative), mean
    and max excess, number of records."""
    recs = [r for res in results for r in res["records"]]
    out = {}
    for name in STAGE_SELECTORS:
        rs = [r for r in recs if r["selector"] == name]
        if not rs:
            continue
        ex = np.array([r["excess"] for r in rs])
        out[name] = {"exact": float(np.mean([r["exact"] for r in rs])),
                     "within1": float(np.mean([r["within1"] for r in rs])),
                     "lost_le_1pt": float(np.mean(ex <= tolerance + 1e-12)),
                     "mean_lost": float(ex.mean()), "max_lost": float(ex.max()), "records": len(rs)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full grid (30 configurations)")
    a = p.parse_args(argv)
    t0 = time.time()
    res = run_stage_benchmark(full_configs() if a.full else quick_configs(), progress=True)
    print(f"{'selector':<12}{'exact':>8}{'±1':>8}{'excess≤1%':>11}{'mean excess':>13}{'max':>9}")
    for name, s in summarise_stages(res).items():
        print(f"{name:<12}{s['exact']:>8.2f}{s['within1']:>8.2f}{s['lost_le_1pt']:>11.2f}"
              f"{s['mean_lost']:>13.4f}{s['max_lost']:>9.4f}")
    print(f"{len(res)} configurations, {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
