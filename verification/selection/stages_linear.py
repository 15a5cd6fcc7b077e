"""Benchmark: PPFE's number of stages T̂ from each selector against the best T.

PPFE (Emrani, Najafi, Motahari 2026), §5 "Bias–Variance Tradeoff" (docs/formulas.md §C.5.12)
on the linear generator of §6.1 (:mod:`synthetic.linear`, eqs. 15–16) with the linear PPFE
of :mod:`algorithms.methods.ppfe.ppfe_linear` (stage 0 federated ridge, stages 1 … T−1 personal ridge on
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
  (:func:`verification.selection.stage_selectors.one_se_pick`): the smallest T within one SE.
* ``cv_rep`` / ``cv_rep_1se`` — repeated cross-validation (lower variance, 2026-11-24):
  ``CV_REPEATS`` independent ``CV_FOLDS``-fold assignments (the first is ``cv``'s), every
  sample's held-out loss averaged over them; argmin / one-SE rule on that.
* ``cv10`` / ``cv10_1se`` — the same with ``CV_FOLDS_MORE`` = 10 folds (one assignment).
* ``bound_cv`` — the bound's T* with γ̂, κ̂₀ fitted to the ``cv_rep`` curve
  (:func:`verification.selection.stage_selectors.fit_bound_curve`).
* ``paper_T4`` — the paper's fixed T = 4.

The best T can be defined from more seeds than the selectors run on (``risk_seeds`` ≥
``seeds``; the first ``seeds`` of them carry the selectors): the population risk alone is
one PPFE path per seed, the selectors about twenty.  The command defaults to ``RISK_SEEDS``
= 20 (:func:`run_config` keeps ``risk_seeds = seeds``, the 3-seed results): the 3-seed best
T equalled the 100-draw best T in only half of the configurations, and the risk beyond
T = 2 is flat to ~0.03 % (2026-11-24 measurement, docs/selection.md; recommended: ``cv_rep``).

"Accuracy lost" for regression: the relative excess population MSE of T̂ over the best T
(``lost_le_1pt`` counts excess ≤ 1 %).  Beside the strict best T every record carries the
noise-aware set (:func:`verification.selection.stage_selectors.noise_aware_best`: the T within the
seed-to-seed standard error of the best) and ``exact_na`` / ``within1_na`` against it.
``python -m verification.selection.stages_linear [--full] [--seeds S] [--risk-seeds R]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import time

import numpy as np

from algorithms.methods.ppfe.ppfe_linear import _split, fit_ppfe_linear, fit_ppfe_linear_path  # _split: PPFE's own validation split
from pfl_theory.ppfe_bounds import select_stages
from pfl_theory.threads import single_blas_thread
from synthetic.linear import make_linear_federation, population_mse
from verification.selection import stage_selectors as sel_

__all__ = ["STAGE_SELECTORS", "quick_configs", "full_configs", "config_halves",
           "estimate_stage_inputs", "cv_losses", "run_config", "run_stage_benchmark",
           "summarise_stages", "best_t_stability", "report"]

STAGE_SELECTORS = ("bound", "validation", "cv", "cv_1se", "cv_rep", "cv_rep_1se", "cv10",
                   "cv10_1se", "bound_cv", "paper_T4")
T_MAX = 6
VAL_FRACTION = 0.2
CV_FOLDS = 5
CV_FOLDS_MORE = 10
CV_REPEATS = 3
SEEDS = 3
RISK_SEEDS = 20   # CLI default: the 3-seed best T moved in 1/3 of configurations (docs/selection.md)


def quick_configs() -> list[dict]:
    return [dict(alpha=0.3, num_clients=20, n_train=40, dim=20),
            dict(alpha=0.8, num_clients=50, n_train=100, dim=20)]


def full_configs() -> list[dict]:
    """α ∈ {0, 0.3, 0.6, 1, uniform} × N ∈ {10, 50, 200} × (n, d) ∈ {(40, 20), (100, 50)}:
    30 configurations."""
    return [dict(alpha=a, num_clients=n_c, n_train=n, dim=d)
            for a, n_c, (n, d) in itertools.product((0.0, 0.3, 0.6, 1.0, "uniform"), (10, 50, 200),
                                                    ((40, 20), (100, 50)))]


def config_halves(configs: list[dict] | None = None) -> tuple[list[dict], list[dict]]:
    """(dev, held-out) halves of the full grid for choosing a selector without tuning on the
    benchmark: a checkerboard over the grid's indices — dev when (index of α + index of N +
    index of (n, d)) is even — so each half holds every α, every N and both (n, d), and each
    (α, N) pair appears once in each half with the other (n, d).  15 + 15 configurations."""
    configs = full_configs() if configs is None else configs
    alphas, ns, nds = [0.0, 0.3, 0.6, 1.0, "uniform"], [10, 50, 200], [(40, 20), (100, 50)]
    dev, held = [], []
    for c in configs:
        parity = (alphas.index(c["alpha"]) + ns.index(c["num_clients"])
                  + nds.index((c["n_train"], c["dim"]))) % 2
        (held if parity else dev).append(c)
    return dev, held


def _mse(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.mean((y - np.einsum("ncd,nd->nc", x, w)) ** 2, axis=1)


def estimate_stage_inputs(fed, *, t_max: int = T_MAX, seed: int = 0) -> dict:
    """γ̂, κ̂₀ and n of the bias–variance bound from a T = ``t_max`` PPFE fit (module
    docstring, :func:`verification.selection.stage_selectors.fit_bound_inputs`), with the normalised
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


def cv_losses(fed, *, t_max: int = T_MAX, seed: int = 0, folds: int = CV_FOLDS,
              repeat: int = 0) -> np.ndarray:
    """Held-out squared errors ``[t_max, N·n]`` of nested ``folds``-fold cross-validation:
    every training sample is predicted once by the PPFE fitted (λ's tuned inside) on the
    other folds of its client, for each T = 1 … t_max.  ``repeat`` r > 0 draws another fold
    assignment (r = 0 is the original one, kept for reproducibility)."""
    n_clients, n, _ = fed.x_train.shape
    if not 2 <= folds <= n // 2:
        raise ValueError(f"folds must be in [2, n/2] = [2, {n // 2}], got {folds}")
    if repeat < 0:
        raise ValueError(f"repeat must be >= 0, got {repeat}")
    rng = np.random.default_rng(1_000_003 + seed if repeat == 0 else [1_000_003 + seed, repeat])
    fold_of = np.empty((n_clients, n), dtype=np.int64)
    rows = np.arange(n_clients)[:, None]
    fold_of[rows, np.argsort(rng.random((n_clients, n)), axis=1)] = np.arange(n) % folds
    out = np.zeros((t_max, n_clients, n))
    for f in range(folds):
        held = np.nonzero(fold_of == f)[1].reshape(n_clients, -1)   # equal count per client
        kept = np.nonzero(fold_of != f)[1].reshape(n_clients, -1)
        sub = dataclasses.replace(fed, x_train=fed.x_train[rows, kept], y_train=fed.y_train[rows, kept])
        xh, yh = fed.x_train[rows, held], fed.y_train[rows, held]
        # the T = 1 … t_max fits as one path: bit-identical to separate fit_ppfe_linear calls
        path = fit_ppfe_linear_path(sub, max_stages=t_max, seed=seed, val_fraction=VAL_FRACTION)
        for t, fit in enumerate(path):
            out[t, rows, held] = (yh - np.einsum("ncd,nd->nc", xh, fit.weights)) ** 2
    return out.reshape(t_max, -1)


def run_config(config: dict, *, seeds: int = SEEDS, t_max: int = T_MAX, seed_offset: int = 0,
               cv_folds: int = CV_FOLDS, risk_seeds: int | None = None) -> dict:
    """Population MSE for T = 1 … t_max per seed (data and splits seeded by
    ``seed_offset + s``) for ``risk_seeds`` (default ``seeds``) seeds, best T (strict and
    noise-aware) of their mean, and each selector's T̂ on the first ``seeds`` of them."""
    risk_seeds = seeds if risk_seeds is None else risk_seeds
    if risk_seeds < seeds:
        raise ValueError(f"risk_seeds must be >= seeds, got {risk_seeds} < {seeds}")
    risk = np.zeros((risk_seeds, t_max))
    picks = []
    for i in range(risk_seeds):
        s = seed_offset + i
        fed = make_linear_federation(seed=s, **config)
        path = fit_ppfe_linear_path(fed, max_stages=t_max, seed=s, val_fraction=VAL_FRACTION)
        risk[i] = [population_mse(fed, fit.weights).mean() for fit in path]
        if i >= seeds:
            continue
        val = np.array([fit.val_mse[-1] for fit in path])
        inputs = estimate_stage_inputs(fed, t_max=t_max, seed=s)
        sel = select_stages(gamma=inputs["gamma"], kappa0=inputs["kappa0"], n=inputs["n"],
                            t_max=t_max)
        cv = cv_losses(fed, t_max=t_max, seed=s, folds=cv_folds)
        rep = (cv + sum(cv_losses(fed, t_max=t_max, seed=s, folds=cv_folds, repeat=r)
                        for r in range(1, CV_REPEATS))) / CV_REPEATS
        cv10 = cv_losses(fed, t_max=t_max, seed=s, folds=CV_FOLDS_MORE)
        curve = sel_.fit_bound_curve(rep.mean(1), float(fed.x_train.shape[1]))
        bcv = select_stages(gamma=curve["gamma"], kappa0=curve["kappa0"], n=curve["n"],
                            t_max=t_max).t_star
        picks.append({"bound": sel.t_star, "validation": int(np.argmin(val)) + 1,
                      "cv": int(np.argmin(cv.mean(1))) + 1, "cv_1se": sel_.one_se_pick(cv),
                      "cv_rep": int(np.argmin(rep.mean(1))) + 1, "cv_rep_1se": sel_.one_se_pick(rep),
                      "cv10": int(np.argmin(cv10.mean(1))) + 1, "cv10_1se": sel_.one_se_pick(cv10),
                      "bound_cv": int(bcv), "paper_T4": min(4, t_max),
                      "_inputs": {**inputs, "cv_curve": curve}})
    best, close, recs = sel_.records(risk, picks, config=config, relative=True)
    return {"config": config, "risk": risk.tolist(), "best_t": best, "near_best": close,
            "records": recs, "inputs": [p["_inputs"] for p in picks]}


def run_stage_benchmark(configs, *, seeds: int = SEEDS, seed_offset: int = 0,
                        cv_folds: int = CV_FOLDS, risk_seeds: int | None = None,
                        progress: bool = False) -> list[dict]:
    """:func:`run_config` for every configuration with numpy's BLAS on one thread (the
    batched solves are small; several threads only contend on shared cores)."""
    out = []
    with single_blas_thread():
        for i, c in enumerate(configs):
            out.append(run_config(c, seeds=seeds, seed_offset=seed_offset, cv_folds=cv_folds,
                                  risk_seeds=risk_seeds))
            if progress:
                print(f"[{i + 1}/{len(configs)}] {c}: best T {out[-1]['best_t']} "
                      f"(within the seed SE: {out[-1]['near_best']})", flush=True)
    return out


def summarise_stages(results: list[dict], *, tolerance: float = 0.01) -> dict[str, dict]:
    """Per selector: fraction exact, within ±1, the same against the noise-aware set,
    excess risk ≤ ``tolerance`` (relative), mean and max excess, number of records."""
    recs = [r for res in results for r in res["records"]]
    return sel_.summarise(recs, STAGE_SELECTORS + sel_.REFERENCES, tolerance=tolerance)


def best_t_stability(results: list[dict], *, first: int = SEEDS) -> dict:
    """How well the best T is defined: per configuration the best T of the mean over the
    first ``first`` (≥ 2) risk seeds against that of all of them — fractions equal and
    within ±1, the number of configurations, and the mean size of each noise-aware set."""
    pairs, sizes = [], []
    for res in results:
        risk = np.asarray(res["risk"], dtype=np.float64)
        if not 2 <= first <= risk.shape[0]:
            raise ValueError(f"first must be in [2, {risk.shape[0]}] (risk seeds), got {first}")
        few, few_close, _ = sel_.noise_aware_best(risk[:first])
        pairs.append((few, res["best_t"]))
        sizes.append((len(few_close), len(res["near_best"])))
    p, z = np.array(pairs), np.array(sizes, dtype=np.float64)
    return {"equal": float(np.mean(p[:, 0] == p[:, 1])),
            "within1": float(np.mean(np.abs(p[:, 0] - p[:, 1]) <= 1)), "configs": len(pairs),
            "near_set_size_first": float(z[:, 0].mean()), "near_set_size_all": float(z[:, 1].mean())}


def print_table(summary: dict[str, dict], *, unit: str = "%", scale: float = 100.0) -> None:
    print(f"{'selector':<15}{'exact':>7}{'±1':>6}{'exact~':>8}{'±1~':>6}{'≤1' + unit:>7}"
          f"{'mean':>8}{'max':>8}   (~: against the noise-aware set of best T)")
    for name, s in summary.items():
        print(f"{name:<15}{s['exact']:>7.2f}{s['within1']:>6.2f}{s['exact_na']:>8.2f}"
              f"{s['within1_na']:>6.2f}{s['lost_le_1pt']:>7.2f}{scale * s['mean_lost']:>8.2f}"
              f"{scale * s['max_lost']:>8.2f}")


def report(res: list[dict]) -> None:
    """Print the table for all results, per half of the grid (:func:`config_halves`) when
    both halves occur, and the stability of the best T against its first ``SEEDS`` seeds."""
    print_table(summarise_stages(res))
    dev, held = (list(map(str, h)) for h in config_halves())
    for name, keys in (("dev", dev), ("held-out", held)):
        part = [r for r in res if str(r["config"]) in keys]
        if part and len(part) < len(res):
            print(f"-- {name} half: {len(part)} configurations")
            print_table(summarise_stages(part))
    n_risk = min(len(r["risk"]) for r in res)
    if n_risk > max(SEEDS, 2):
        st = best_t_stability(res)
        print(f"best T of the first {SEEDS} seeds = best T of all {n_risk}: {st['equal']:.2f} "
              f"(±1: {st['within1']:.2f}) of {st['configs']} configurations; mean size of "
              f"the noise-aware set {st['near_set_size_first']:.1f} -> {st['near_set_size_all']:.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full grid (30 configurations)")
    p.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per configuration (default {SEEDS})")
    p.add_argument("--risk-seeds", type=int, default=RISK_SEEDS,
                   help=f"seeds defining the best T, >= --seeds (default {RISK_SEEDS})")
    p.add_argument("--cv-folds", type=int, default=CV_FOLDS, help=f"folds of cv (default {CV_FOLDS})")
    p.add_argument("--half", choices=("dev", "held"), default=None,
                   help="only one half of the full grid (config_halves)")
    p.add_argument("--save", default=None, metavar="FILE", help="write the results as JSON")
    p.add_argument("--load", nargs="+", default=None, metavar="FILE",
                   help="print the tables of saved results (--save) instead of running")
    a = p.parse_args(argv)
    import json
    if a.load:
        res = []
        for path in a.load:
            with open(path) as f:
                res.extend(json.load(f))
        report(res)
        return 0
    t0 = time.time()
    configs = full_configs() if a.full or a.half else quick_configs()
    if a.half:
        configs = config_halves(configs)[a.half == "held"]
    res = run_stage_benchmark(configs, seeds=a.seeds, cv_folds=a.cv_folds,
                              risk_seeds=max(a.risk_seeds, a.seeds), progress=True)
    if a.save:
        with open(a.save, "w") as f:
            json.dump(res, f, default=str)
    report(res)
    print(f"{len(res)} configurations × {a.seeds} seeds (best T from {len(res[0]['risk'])}), "
          f"{time.time() - t0:.0f} s, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
