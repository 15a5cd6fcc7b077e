"""The selectors of the CGPFL K-selection benchmark (:mod:`verification.selection.k_benchmark`): each
one's K̂ for one (case, training seed), with the seconds it took.

CGPFL (Tang, Guo, Guo, IJCAI 2022; docs/formulas.md §A.5, §A.9).  The model-only selectors
and ``peer`` (:func:`model_selections`) see the personalized models θ̃_i of the K = 1 run
(pFedMe) after ``select_round`` rounds — the Θ* of the cost in e(K); the validation
selectors (:func:`validation_selections`) run their own short CGPFL runs.  All search the
same range 1 … k_hi:

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
* ``peer_val`` — ``peer`` without the data leak: the θ̃_i come from the validation
  selectors' warm-up on the fit part of each client's training data, the score is on the
  held-out part.
* ``val``, ``val_1se_small``, ``val_1se_large`` — held-out validation after short CGPFL runs
  per K (:mod:`algorithms.methods.clustered.cgpfl_validation`): 1/``val_folds`` of each client's training
  data held out, a K = 1 warm-up of ``val_warmup`` rounds shared by every K, ``val_rounds``
  rounds per K, personalized accuracy on the held-out part; K̂ = the argmax (``val``), the
  smallest / largest K within one paired standard error of the maximum.
* ``val_smooth`` — ``val``'s curve averaged over 3 neighbouring K before the argmax
  (:func:`algorithms.methods.clustered.cgpfl_validation.smooth`: less selection noise, a slight bias to larger K).
* ``val_cv``, ``val_cv_smooth`` — the same with ``val_folds``-fold cross-validation: every
  fold of each client's training data serves once as the held-out part (own warm-up per fold),
  the correct predictions summed over the folds (4× the held-out samples, 4× the cost);
  argmax / 3-point smoothed argmax.  Only when ``BenchConfig.val_variants`` (``QUICK``,
  ``FULL``); ``val*`` are then read off the first fold(s) of the same run and timed on them.
* ``val_loss``, ``val_loss_1se`` — ``val``'s runs (same split, warm-up, short runs) with
  the held-out **cross-entropy** as the criterion: K̂ = the argmin of the pooled held-out
  loss, or the smallest K within one paired client-level SE of the minimum (the one-SE rule);
  ``val_cv_loss``, ``val_cv_loss_1se`` — the same on the ``val_cv`` runs (loss summed over
  the folds; only with ``val_variants``).  Why the loss: a proper scoring rule that is
  continuous in the predicted probabilities, so less selection noise on small held-out parts
  (:mod:`algorithms.methods.clustered.cgpfl_validation`, "Criterion").
* ``grid_other_seed`` (reference, not a cheap selector) — the best K of the full K grid
  trained with *another* training seed: how well-defined the best K is at all (the seed-
  averaged curve is often flat within noise beyond K₀).  It is scored on the same test
  samples as the target (under each scoring), so it shares their sampling noise (an
  optimistic reference).
* ``planted_k0`` (reference) — the planted K₀ itself: what knowing the truth achieves.

The two references are set by :func:`verification.selection.k_benchmark.run_case` from its K grid.
"""

from __future__ import annotations

import time

import numpy as np

from algorithms.engine.base import flatten
from algorithms.methods.clustered.cgpfl_validation import first_folds, validation_select_k
from pfl_theory.cgpfl import select_k
from pfl_theory.cgpfl_selection import bic_curve, cluster_path
from verification.experiments.cgpfl import CGPFL_HP
from verification.selection.k_cases import TRAIN_RESTARTS, BenchConfig
from verification.selection.k_scores import argmax_first, peer_curve

__all__ = ["SELECTORS", "VARIANTS", "model_selections", "validation_selections"]

SELECTORS = ("e_relative", "e_lambda", "bic", "peer", "peer_1se", "peer_val", "val",
             "val_1se_small", "val_1se_large", "val_smooth", "val_cv", "val_cv_smooth",
             "val_loss", "val_loss_1se", "val_cv_loss", "val_cv_loss_1se",
             "grid_other_seed", "planted_k0")
# only with BenchConfig.val_variants
VARIANTS = ("val_cv", "val_cv_smooth", "val_cv_loss", "val_cv_loss_1se")


def model_selections(theta: np.ndarray, like, fed, model, cfg: BenchConfig, seed: int,
                     k_hi: int, seconds: dict) -> dict:
    """The model-only selectors and ``peer`` on the K = 1 run's θ̃ (full training data)."""
    t0 = time.perf_counter()
    m = fed.train.counts.cpu().double().numpy()
    sel = select_k(theta, m=m, k_max=k_hi, restarts=cfg.restarts, seed=seed)
    lam = CGPFL_HP["lam"]
    with np.errstate(over="ignore", invalid="ignore"):
        e_lam = sel.complexity_terms + lam * sel.costs
    bic = bic_curve(sel.path, dim=theta.shape[1])
    t1 = time.perf_counter()
    curve, se = peer_curve(theta, sel.path, fed.train, m, model, like, dtype=fed.dtype,
                           device=fed.device)
    t2 = time.perf_counter()
    for name in ("e_relative", "e_lambda", "bic"):
        seconds[name] = seconds.get(name, 0.0) + (t1 - t0)
    for name in ("peer", "peer_1se"):
        seconds[name] = seconds.get(name, 0.0) + (t1 - t0) + (t2 - t1)
    return {"e_relative": sel.k_hat, "e_lambda": int(sel.ks[np.argmin(e_lam)]),
            "bic": int(sel.ks[np.argmin(bic)]), "peer": argmax_first(curve),
            "peer_1se": int(np.flatnonzero(curve >= curve.max() - se)[0]) + 1}


def validation_selections(fed, model, cfg: BenchConfig, seed: int, k_hi: int,
                          seconds: dict) -> dict:
    """``val_*`` (short CGPFL runs per K scored on a held-out part of each client's training
    data, :func:`algorithms.methods.clustered.cgpfl_validation.validation_select_k`) and ``peer_val`` (the
    ``peer`` curve of the first fold's warm-up θ̃, fitted on the fit part, scored on the
    held-out part: no client's own training data in its score)."""
    cv_all = cfg.val_folds if cfg.val_variants else cfg.val_cv
    every = validation_select_k(fed, model, CGPFL_HP, k_max=k_hi, warmup_rounds=cfg.val_warmup,
                                rounds=cfg.val_rounds, folds=cfg.val_folds, cv=max(cv_all, cfg.val_cv),
                                seed=seed, kmeans_restarts=TRAIN_RESTARTS)
    res = first_folds(every, cfg.val_cv)
    t0, t1 = 0.0, sum(res.seconds)  # val*: the time of their own folds
    t_peer = time.perf_counter()
    split, state = res.warmups[0]
    theta = flatten(state.models["personalized"]).detach().cpu().double().numpy()
    m = split.train.counts.cpu().double().numpy()
    path = cluster_path(theta, weights=m, k_max=k_hi, restarts=cfg.restarts, seed=seed)
    like = {n: v[:1] for n, v in state.models["personalized"].items()}
    curve, _ = peer_curve(theta, path, split.test, m, model, like, dtype=fed.dtype, device=fed.device)
    t2 = t1 + time.perf_counter() - t_peer
    out = {f"val_{r}" if r != "max" else "val": k for r, k in res.k_hat.items()}
    out.update({"val_loss": res.pick("loss", "max"), "val_loss_1se": res.pick("loss", "1se_small")})
    if cfg.val_variants:
        out.update({"val_cv": every.k_hat["max"], "val_cv_smooth": every.k_hat["smooth"],
                    "val_cv_loss": every.pick("loss", "max"),
                    "val_cv_loss_1se": every.pick("loss", "1se_small")})
    for name in out:
        seconds[name] = seconds.get(name, 0.0) + (sum(every.seconds) if name in VARIANTS else t1 - t0)
    # the warm-up is a 1/(1 + k_hi·rounds/warmup) share of the validation run
    share = cfg.val_warmup / (cfg.val_warmup + k_hi * cfg.val_rounds) / cfg.val_cv
    seconds["peer_val"] = seconds.get("peer_val", 0.0) + share * (t1 - t0) + (t2 - t1)
    return {**out, "peer_val": argmax_first(curve)}

