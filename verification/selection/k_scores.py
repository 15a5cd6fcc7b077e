"""Scoring of the K-selection benchmark (:mod:`verification.selection.k_benchmark`): the peer-validation
curve, the noise-aware set of best K, the per-record agreement and the summary.

CGPFL (Tang, Guo, Guo, IJCAI 2022; docs/formulas.md §A.5, §A.9).  Two targets are scored for
every selector, side by side (neither replaces the other):

* **strict** — the *best K*: the argmax of the seed-averaged personalized test accuracy
  ``mean[K] = (1/S) Σ_s acc[s, K]`` (smallest K on ties).  ``exact``: K̂ = best K;
  ``within1``: |K̂ − best K| ≤ 1.
* **noise-aware** — the *set of best K*: every K with ``mean[K] ≥ max_K mean − se``, where
  ``se`` is the measured seed-to-seed standard error of a seed-averaged accuracy,
  ``se = √(mean_K s²_K / S)`` with ``s²_K`` the unbiased variance of ``acc[·, K]`` over the S
  training seeds, pooled over the K grid of the case (S = 2 seeds give one degree of freedom
  per K, the pooling ``k_hi`` of them).  No fixed slack: ``se`` comes from the seeds.
  ``set_exact``: K̂ in the set; ``set_within1``: K̂ within ±1 of some K in the set.

The accuracy lost ``mean[best K] − mean[K̂]`` is the same for both.

**Halves of the grid** (:func:`half`, :func:`split_halves`), to choose a selector on one half
of the cases and judge it on the other: *dev* = case index mod 4 ∈ {0, 3}, *held-out* = mod 4
∈ {1, 2}, the index being the case's position in
:func:`verification.selection.k_cases.full_cases` (difficulty is the innermost loop of that
grid, sizes the next: each (kind, N, K₀) block gives one equal/easy and one unequal/hard case
to dev, the other two to held-out; docs/selection.md).
"""

from __future__ import annotations

import numpy as np
import torch

from algorithms.engine.base import unflatten
from algorithms.engine.evaluation import evaluate

__all__ = ["peer_curve", "argmax_first", "best_set", "records", "summarise", "HALVES", "half",
           "split_halves"]

HALVES = ("dev", "held_out")


def half(index: int) -> str:
    """``"dev"`` for case index mod 4 ∈ {0, 3}, ``"held_out"`` for mod 4 ∈ {1, 2}."""
    return "dev" if index % 4 in (0, 3) else "held_out"


def split_halves(results: list) -> dict[str, list]:
    """``results`` (one per case, in the grid's order) as ``{"dev": [...], "held_out": [...]}``."""
    out = {h: [] for h in HALVES}
    for i, r in enumerate(results):
        out[half(i)].append(r)
    return out


def argmax_first(curve) -> int:
    """1-based index of the first maximum (smallest K on ties)."""
    curve = np.asarray(curve, dtype=np.float64)
    return int(np.flatnonzero(curve >= curve.max() - 1e-12)[0]) + 1


def peer_curve(theta: np.ndarray, path, split, weights: np.ndarray, model, like, *,
               dtype, device) -> tuple[np.ndarray, float]:
    """Accuracy curve of the leave-one-out context models on ``split`` (selection_k's ``peer``):
    client i's context model for K is the ``weights``-weighted mean of the *other* members'
    models θ̃_j of its cluster in ``path`` (the K = 1 leave-one-out mean if it is alone).
    Returns the pooled accuracy per K and the binomial standard error of its maximum."""
    w = np.asarray(weights, dtype=np.float64)
    n_ev = split.counts.double().cpu()
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
        params = unflatten(torch.as_tensor(loo, dtype=dtype, device=device), like)
        acc, _ = evaluate(model, params, split)
        curve.append(float((acc.cpu() * n_ev).sum() / n_ev.sum()))
    curve = np.asarray(curve)
    top = curve.max()
    return curve, float(np.sqrt(top * (1 - top) / float(n_ev.sum())))


def best_set(acc) -> tuple[np.ndarray, float]:
    """The noise-aware set of best K (1-based, sorted) of an accuracy table ``acc[S, K]`` and
    the seed-to-seed standard error ``se`` it uses (module docstring).  With one seed the
    variance is unknown: the set is the strict best K and ``se`` is NaN."""
    acc = np.asarray(acc, dtype=np.float64)
    mean = acc.mean(0)
    if acc.shape[0] < 2:
        return np.array([argmax_first(mean)]), float("nan")
    se = float(np.sqrt(acc.var(0, ddof=1).mean() / acc.shape[0]))
    return np.flatnonzero(mean >= mean.max() - se - 1e-12) + 1, se


def records(case, acc, picks: list[dict]) -> tuple[int, np.ndarray, float, list[dict]]:
    """Per (seed, selector) records of ``case`` from the accuracy table ``acc[S, K]`` and each
    seed's ``{selector: K̂}``; returns (best K, best set, se, records)."""
    acc = np.asarray(acc, dtype=np.float64)
    mean = acc.mean(0)
    best = argmax_first(mean)
    good, se = best_set(acc)
    out = []
    for s, p in enumerate(picks):
        for name, k_hat in p.items():
            out.append({"case": case.name, "kind": case.kind, "n": case.n, "k0": case.k0,
                        "sizes": case.sizes, "difficulty": case.difficulty, "seed": s,
                        "selector": name, "k_hat": int(k_hat), "best_k": best,
                        "exact": k_hat == best, "within1": abs(k_hat - best) <= 1,
                        "set_exact": bool(k_hat in good),
                        "set_within1": bool(np.abs(good - k_hat).min() <= 1),
                        "acc_lost": float(mean[best - 1] - mean[k_hat - 1])})
    return best, good, se, out


def summarise(results: list[dict], *, points: float = 0.01, order=()) -> dict[str, dict]:
    """Per selector: fraction exact and within ±1 (strict and noise-aware), with accuracy lost
    ≤ ``points`` (1 point = 0.01), mean and max accuracy lost, number of records and, where
    recorded, the mean seconds per (case, seed).  Selectors in ``order`` first."""
    recs = [r for res in results for r in res["records"]]
    order = list(order)
    out = {}
    for name in sorted({r["selector"] for r in recs},
                       key=lambda s: (order.index(s) if s in order else len(order), s)):
        rs = [r for r in recs if r["selector"] == name]
        lost = np.array([r["acc_lost"] for r in rs])
        row = {"exact": float(np.mean([r["exact"] for r in rs])),
               "within1": float(np.mean([r["within1"] for r in rs])),
               "lost_le_1pt": float(np.mean(lost <= points + 1e-12)),
               "mean_lost": float(lost.mean()), "max_lost": float(lost.max()),
               "records": len(rs)}
        if all("set_exact" in r for r in rs):
            row["set_exact"] = float(np.mean([r["set_exact"] for r in rs]))
            row["set_within1"] = float(np.mean([r["set_within1"] for r in rs]))
        secs = [res["seconds"][name] for res in results if name in res.get("seconds", {})]
        if secs:
            row["seconds"] = float(np.mean(secs))
        out[name] = row
    return out
