"""Benchmark: CGPFL's K̂ from each selector against the empirically best K.

CGPFL (Tang, Guo, Guo, IJCAI 2022; docs/formulas.md §A.5, §A.9).  For every planted
federation (:mod:`verification.selection_data`) and training seed, CGPFL is trained for
every K in 1 … k_hi (k_hi = min(N/2, ``k_cap``)) with the hyper-parameters of
:data:`verification.experiments_cgpfl.CGPFL_HP` (λ = 12) and evaluated on the clients' test
data (personalized models θ̃_i, sample-weighted accuracy).  The **best K** of a case is the
argmax of the accuracy averaged over the seeds (smallest K on ties).  The selectors all see
the personalized models θ̃_i of the K = 1 run (pFedMe) after ``select_round`` rounds — the
Θ* of the cost in e(K) — and search the same range 1 … k_hi:

* ``e_relative`` — e(K) with the default μ = 1/cost(1) (:func:`pfl_theory.cgpfl.select_k`);
* ``e_lambda`` — e(K) with μ = λ (the paper's μ ≈ λ + L/2 with the unknown L/2 ≥ 0 dropped,
  so a lower bound of the paper's weight);
* ``bic`` — X-means BIC of the same clustering path (:func:`pfl_theory.cgpfl_selection.bic_curve`);
* ``peer`` — leave-one-out validation of the contexts: for each K, client i's context model
  is the sample-weighted mean of the *other* members' models θ̃_j of its cluster (the K = 1
  leave-one-out mean if it is alone), scored on client i's own training data, which those
  models were not fitted to; K̂ maximises the pooled accuracy (smallest K on ties).  It asks
  what CGPFL's pooling does — do my context peers' models fit my data? — at the price of one
  evaluation per K, no extra training and no held-out split.  Two leaks remain: the peers
  share the global model trained on everyone, and client i's cluster was chosen with θ̃_i
  itself, so the score favours peers that happen to resemble i and over-selects K (seen on
  the benchmark); a split of each client's data would remove the second at the price of a
  second warm-up run.
* ``peer_1se`` — the same curve with the one-standard-error rule: the smallest K within one
  binomial standard error √(p(1−p)/n) of the maximum.
* ``grid_other_seed`` (reference, not a cheap selector) — the best K of the full K grid
  trained with *another* training seed: how well-defined the best K is at all (the seed-
  averaged curve is often flat within noise beyond K₀).

Per (case, seed) the record holds each selector's K̂, whether it equals the best K (exact),
is within ±1, and the accuracy lost ``acc(best K) − acc(K̂)`` on the seed-averaged curve.
:func:`summarise` aggregates; ``python -m verification.selection_k [--full]`` prints it.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from algorithms.base import flatten, get_algorithm, unflatten
from algorithms.evaluation import evaluate
from algorithms.models import build_model
from pfl_theory.cgpfl import select_k
from pfl_theory.cgpfl_selection import bic_curve
from pfl_theory.threads import set_torch_threads, single_blas_thread
from pfl_theory.validation import positive_int
from verification.experiments_cgpfl import CGPFL_HP
from verification.selection_data import SelectionCase, make_case_federation

__all__ = ["SELECTORS", "BenchConfig", "QUICK", "FULL", "quick_cases", "medium_cases", "full_cases",
           "run_case", "run_benchmark", "summarise"]

TRAIN_RESTARTS = 3  # server k-means restarts inside CGPFL training (budget; the clusters are stable)
SELECTORS = ("e_relative", "e_lambda", "bic", "peer", "peer_1se", "grid_other_seed")


@dataclass(frozen=True)
class BenchConfig:
    """Training budget of the benchmark (``rounds`` CGPFL rounds per K, ``seeds`` training
    seeds, K ≤ ``k_cap``, selection on the round-``select_round`` models, k-means
    ``restarts`` of the selectors)."""

    rounds: int = 10
    seeds: int = 2
    k_cap: int = 10
    select_round: int = 3
    restarts: int = 30


QUICK = BenchConfig(rounds=8, seeds=2, k_cap=6, select_round=3, restarts=10)
FULL = BenchConfig()


def quick_cases() -> list[SelectionCase]:
    """Four N = 20 cases (one per kind × size law; the hard ones included): < 30 s."""
    return [SelectionCase("label", 20, 4, "equal", "easy"),
            SelectionCase("label", 20, 3, "unequal", "hard"),
            SelectionCase("feature", 20, 2, "equal", "easy"),
            SelectionCase("feature", 20, 4, "unequal", "hard")]


def medium_cases() -> list[SelectionCase]:
    """Eight cases, both kinds, N ∈ {20, 50}, K₀ ∈ {2, 4, 6, 8}, hard and unequal included
    (the ``--full`` size of the verification check ``cgpfl.heur_khat_planted``)."""
    spec = [("label", 20, 4, "equal", "easy"), ("label", 20, 6, "unequal", "hard"),
            ("label", 50, 8, "equal", "hard"), ("label", 50, 2, "unequal", "easy"),
            ("feature", 20, 4, "equal", "easy"), ("feature", 20, 6, "unequal", "hard"),
            ("feature", 50, 8, "equal", "hard"), ("feature", 50, 2, "unequal", "easy")]
    return [SelectionCase(k, n, k0, sz, d, seed=100 * k0 + n) for k, n, k0, sz, d in spec]


def full_cases() -> list[SelectionCase]:
    """60 cases: N = 20 with K₀ ∈ {2, 4, 6, 8}, N = 50 with K₀ ∈ {3, 5, 7}, each × sizes
    (equal, unequal) × difficulty (easy, hard) × kind (label, feature); N = 200 with K₀ ∈
    {2, 8}, hard, K₀ = 2 equal and K₀ = 8 unequal sizes, both kinds."""
    grid = [(20, k0) for k0 in (2, 4, 6, 8)] + [(50, k0) for k0 in (3, 5, 7)]
    cases = [SelectionCase(kind, n, k0, sizes, diff, seed=100 * k0 + n)
             for kind in ("label", "feature") for n, k0 in grid
             for sizes in ("equal", "unequal") for diff in ("easy", "hard")]
    cases += [SelectionCase(kind, 200, k0, sizes, "hard", seed=100 * k0 + 200)
              for kind in ("label", "feature") for k0, sizes in ((2, "equal"), (8, "unequal"))]
    return cases


def _accuracy(model, params, split) -> float:
    acc, _ = evaluate(model, params, split)
    c = split.counts.double()
    return float((acc.cpu() * c.cpu()).sum() / c.sum())


def _train(fed, model, k: int, rounds: int, seed: int, capture: int = 0):
    """CGPFL with K contexts; returns (final personalized accuracy, θ̃ at round ``capture``)."""
    alg = get_algorithm("cgpfl")(num_contexts=k, **{**CGPFL_HP, "kmeans_restarts": TRAIN_RESTARTS})
    state, captured = alg.init(fed, model, seed), None
    for r in range(1, rounds + 1):
        state = alg.round(state, fed, model)
        if r == capture:
            captured = flatten(state.models["personalized"]).detach().cpu().double().numpy()
    return _accuracy(model, alg.evaluated(state)["personalized"], fed.test), captured, state


def _peer_validation(theta: np.ndarray, path, fed, model, like) -> tuple[np.ndarray, float]:
    """Accuracy curve of the leave-one-out context models (module docstring, ``peer``) on the
    clients' own training data, and the binomial standard error of its maximum."""
    w = fed.train.counts.cpu().double().numpy()
    n_tr = fed.train.counts.double()
    glob = (w @ theta - w[:, None] * theta) / (w.sum() - w)[:, None]  # K = 1 leave-one-out
    curve = []
    for cl in path.clusterings:
        lab = np.asarray(cl.labels)
        k = int(lab.max()) + 1
        sums = np.zeros((k, theta.shape[1]))
        np.add.at(sums, lab, w[:, None] * theta)
        mass = np.bincount(lab, weights=w, minlength=k)
        rest = mass[lab] - w
        loo = np.where(rest[:, None] > 0, (sums[lab] - w[:, None] * theta)
                       / np.maximum(rest, 1e-300)[:, None], glob)
        params = unflatten(torch.as_tensor(loo, dtype=fed.dtype, device=fed.device), like)
        acc, _ = evaluate(model, params, fed.train)
        curve.append(float((acc.cpu() * n_tr.cpu()).sum() / n_tr.sum()))
    curve = np.asarray(curve)
    top = curve.max()
    return curve, float(np.sqrt(top * (1 - top) / float(n_tr.sum())))


def _argmax_first(curve: np.ndarray) -> int:
    """1-based index of the first maximum (smallest K on ties)."""
    return int(np.flatnonzero(curve >= curve.max() - 1e-12)[0]) + 1


def _selections(theta: np.ndarray, like, fed, model, cfg: BenchConfig, seed: int, k_hi: int) -> dict:
    m = fed.train.counts.cpu().double().numpy()
    sel = select_k(theta, m=m, k_max=k_hi, restarts=cfg.restarts, seed=seed)
    lam = CGPFL_HP["lam"]
    with np.errstate(over="ignore", invalid="ignore"):
        e_lam = sel.complexity_terms + lam * sel.costs
    bic = bic_curve(sel.path, dim=theta.shape[1])
    curve, se = _peer_validation(theta, sel.path, fed, model, like)
    return {"e_relative": sel.k_hat, "e_lambda": int(sel.ks[np.argmin(e_lam)]),
            "bic": int(sel.ks[np.argmin(bic)]), "peer": _argmax_first(curve),
            "peer_1se": int(np.flatnonzero(curve >= curve.max() - se)[0]) + 1}


def run_case(case: SelectionCase, cfg: BenchConfig = FULL) -> dict:
    """Train the K grid on ``case`` for every seed; returns the accuracy curves, best K and
    every selector's K̂ per seed (records for :func:`summarise`)."""
    fed, assign = make_case_federation(case)
    model = build_model("mlr", fed)
    k_hi = max(1, min(case.n // 2, cfg.k_cap))
    acc = np.zeros((cfg.seeds, k_hi))
    picks = []
    for s in range(cfg.seeds):
        theta = like = None
        for k in range(1, k_hi + 1):
            a, cap, st = _train(fed, model, k, cfg.rounds, s, capture=cfg.select_round if k == 1 else 0)
            acc[s, k - 1] = a
            if k == 1:
                theta, like = cap, {n: v[:1] for n, v in st.models["personalized"].items()}
        picks.append(_selections(theta, like, fed, model, cfg, s, k_hi))
    mean = acc.mean(0)
    best = _argmax_first(mean)
    if cfg.seeds > 1:
        for s, p in enumerate(picks):
            p["grid_other_seed"] = _argmax_first(acc[(s + 1) % cfg.seeds])
    records = []
    for s, p in enumerate(picks):
        for name, k_hat in p.items():
            records.append({"case": case.name, "kind": case.kind, "n": case.n, "k0": case.k0,
                            "sizes": case.sizes, "difficulty": case.difficulty, "seed": s,
                            "selector": name, "k_hat": k_hat, "best_k": best,
                            "exact": k_hat == best, "within1": abs(k_hat - best) <= 1,
                            "acc_lost": float(mean[best - 1] - mean[k_hat - 1])})
    return {"case": asdict(case), "accuracy": acc.tolist(), "best_k": best, "records": records}


def _worker_init() -> None:
    set_torch_threads()


def run_benchmark(cases, cfg: BenchConfig = FULL, *, progress: bool = False,
                  jobs: int = 1) -> list[dict]:
    """:func:`run_case` for every case (in order), with torch and BLAS at
    :func:`default_threads` (``PFLT_THREADS``, default 1: these small kernels are 10–50×
    slower with several threads on shared cores); the caller's torch thread count is
    restored afterwards.  ``jobs > 1`` runs the cases in that many worker processes (same
    results: every case is seeded on its own)."""
    jobs = positive_int("jobs", jobs)
    cases = list(cases)
    out: list[dict] = []
    before = torch.get_num_threads()
    t0 = time.time()
    try:
        set_torch_threads()
        with single_blas_thread():
            if jobs == 1:
                results = (run_case(c, cfg) for c in cases)
                pool = None
            else:
                from concurrent.futures import ProcessPoolExecutor

                pool = ProcessPoolExecutor(max_workers=jobs, initializer=_worker_init)
                results = pool.map(run_case, cases, [cfg] * len(cases))
            try:
                for i, (case, res) in enumerate(zip(cases, results)):
                    out.append(res)
                    if progress:
                        print(f"[{i + 1}/{len(cases)}] {case.name}: best K {res['best_k']}, "
                              f"{time.time() - t0:.1f} s elapsed", flush=True)
            finally:
                if pool is not None:
                    pool.shutdown()
    finally:
        torch.set_num_threads(before)
    return out


def summarise(results: list[dict], *, points: float = 0.01) -> dict[str, dict]:
    """Per selector: fraction exact, within ±1, with accuracy lost ≤ ``points`` (1 point =
    0.01), mean and max accuracy lost, number of records."""
    recs = [r for res in results for r in res["records"]]
    out = {}
    for name in sorted({r["selector"] for r in recs}, key=lambda s: (s not in SELECTORS, s)):
        rs = [r for r in recs if r["selector"] == name]
        lost = np.array([r["acc_lost"] for r in rs])
        out[name] = {"exact": float(np.mean([r["exact"] for r in rs])),
                     "within1": float(np.mean([r["within1"] for r in rs])),
                     "lost_le_1pt": float(np.mean(lost <= points + 1e-12)),
                     "mean_lost": float(lost.mean()), "max_lost": float(lost.max()),
                     "records": len(rs)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--full", action="store_true", help="the full grid (60 cases) instead of the quick 4")
    p.add_argument("--json", type=str, default=None, help="write all results to this JSON file")
    p.add_argument("--jobs", type=int, default=1,
                   help="worker processes (cases run in parallel; default 1)")
    a = p.parse_args(argv)
    cases, cfg = (full_cases(), FULL) if a.full else (quick_cases(), QUICK)
    t0 = time.time()
    res = run_benchmark(cases, cfg, progress=True, jobs=a.jobs)
    summ = summarise(res)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"config": asdict(cfg), "results": res, "summary": summ}, fh)
    print(f"{'selector':<12}{'exact':>8}{'±1':>8}{'lost≤1pt':>10}{'mean lost':>11}{'max lost':>10}")
    for name, s in summ.items():
        print(f"{name:<12}{s['exact']:>8.2f}{s['within1']:>8.2f}{s['lost_le_1pt']:>10.2f}"
              f"{s['mean_lost']:>11.4f}{s['max_lost']:>10.4f}")
    print(f"{len(cases)} cases, {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
