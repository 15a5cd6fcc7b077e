"""Choosing CGPFL's number of contexts K by held-out validation after short runs.

CGPFL (Tang, Guo, Guo, IJCAI 2022; docs/formulas.md §A.5, §A.9) needs K; its CGPFL-Heur
criterion e(K) (eq. 11, :func:`pfl_theory.cgpfl.select_k`) rarely finds the K that maximises
the personalized accuracy (docs/selection.md).  This selector asks the question directly:

1. **Split.**  Each client's training data are permuted (``numpy.random.default_rng(seed)``)
   and cut into ``folds`` near-equal chunks; chunk 0 is the client's *validation* part, the
   rest its *fit* part (:func:`holdout_split`).  The clients' test data are never used.
2. **Warm-up (shared by every K).**  CGPFL with K = 1 (pFedMe-like: one context model) is
   trained ``warmup_rounds`` rounds on the fit parts.
3. **Short run per K.**  For K = 1 … ``k_max`` the warm-up state is split into K contexts —
   k-means (``kmeans_restarts`` seeded restarts) of the uploaded models ω̃_{i,R}, each context
   model the mean of its members' uploads, as CGPFL's own server step (eq. 3) — and CGPFL
   with K contexts is trained ``rounds`` more rounds on the fit parts.
4. **Score.**  Personalized models θ̃_i are scored on the clients' validation parts: the
   pooled accuracy ``acc(K) = Σ_i correct_i / Σ_i n_i`` (the sample-weighted accuracy every
   report uses), and for each K the standard error of ``acc(K) − acc(K_max)`` (K_max the
   argmax) with the **clients as the sampling unit** (paired: the same validation samples
   score every K; ratio-estimator variance of Σ_i d_i / Σ_i n_i with d_i the per-client
   difference in correct predictions).
5. **Choose.**  ``rule="max"``: the argmax (smallest K on ties); ``"1se_small"``: the
   smallest K whose accuracy is within one standard error of the maximum; ``"1se_large"``:
   the largest such K; ``"smooth"``: the argmax of the curve averaged over 3 neighbouring K
   (:func:`smooth`; beyond K₀ the true curve is nearly flat, so averaging neighbours cuts the
   selection noise of each point at the price of a bias toward the flat side of K₀, i.e. a
   slightly larger K).  Under-selecting K costs far more than over-selecting on the
   selection benchmark (docs/selection.md), which is what the rules are measured on.

**Criterion.**  Beside the accuracy, step 4 records the held-out **cross-entropy** of the
personalized models, summed per client (``loss[fold, K−1, client]``, sample-weighted: the
client's mean loss times its held-out samples), the curve of the pooled mean loss
``L(K) = Σ_i loss_i / Σ_i n_i`` and its paired client-level standard error (the same ratio
estimator, with K* the argmin).  The log score is a *strictly proper* scoring rule (Gneiting &
Raftery, "Strictly proper scoring rules, prediction, and estimation", JASA 102, 2007, §2–3:
its expectation is uniquely optimised by the true conditional distribution) and, unlike the
0–1 accuracy, changes continuously with the predicted probabilities, so two nearby models'
held-out difference is estimated from every sample rather than from the few whose
prediction flips — the usual reason to select models by held-out deviance on small
validation sets (Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd
ed., 2009, §7.10; cross-validated deviance is glmnet's default for classification).
``k_hat_loss[rule]`` applies the same rules to ``−L(K)`` (``"max"``: the argmin of the loss;
``"1se_small"``: the smallest K within one paired SE of the minimum, the one-SE rule of
Breiman et al., *Classification and Regression Trees*, 1984, and ESL §7.10).
:meth:`ValidationResult.pick` chooses by criterion (:data:`CRITERIA`) and rule.

With ``cv > 1`` steps 1–4 are repeated with folds 0 … cv−1 as the validation part (each with
its own warm-up) and the correct predictions are summed over them (cross-validation: every
validated sample counts once, the curve's sampling noise shrinks about as 1/√cv);
:func:`first_folds` rescores a result on its first folds only, so one ``cv = folds`` run also
gives the single hold-out choice.

Cost: ``cv·(warmup_rounds + k_max·rounds)`` CGPFL rounds on (folds−1)/folds of the data,
against ``k_max·T`` for training the whole K grid.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from algorithms.engine.base import flatten, get_algorithm
from algorithms.methods.clustered.cgpfl import assignment_matrix, project
from algorithms.engine.evaluation import evaluate
from pfl_theory.kmeans import kmeans
from pfl_theory.validation import positive_int
from synthetic.federation import Federation, Split

__all__ = ["RULES", "CRITERIA", "ValidationResult", "holdout_split", "smooth", "choose", "validation_select_k",
           "first_folds"]

RULES = ("max", "1se_small", "1se_large", "smooth")
CRITERIA = ("accuracy", "loss")  # held-out personalized accuracy / cross-entropy


@dataclass(frozen=True)
class ValidationResult:
    """Validation accuracy ``curve[K−1]`` for K = 1 … k_max, the paired standard error
    ``se[K−1]`` of ``curve[K−1] − max(curve)``, the K chosen by each rule (``k_hat``), the
    (fit/validation split, warm-up state) of each fold used (``warmups``), the correct
    predictions ``correct[fold, K−1, client]`` and validation samples ``counts[fold, client]``
    per fold, and the seconds each fold took (``seconds``).  The loss criterion: the summed
    held-out cross-entropy ``loss[fold, K−1, client]``, the mean-loss curve ``loss_curve``,
    the paired SE ``loss_se`` of ``loss_curve − min(loss_curve)`` and ``k_hat_loss`` (the
    rules applied to ``−loss_curve``; module docstring)."""

    curve: np.ndarray
    se: np.ndarray
    k_hat: dict
    warmups: tuple = ()   # (split, K = 1 warm-up state) per validation fold used
    correct: np.ndarray | None = None
    counts: np.ndarray | None = None
    seconds: tuple = ()
    loss: np.ndarray | None = None
    loss_curve: np.ndarray | None = None
    loss_se: np.ndarray | None = None
    k_hat_loss: dict | None = None

    @property
    def ks(self) -> np.ndarray:
        return np.arange(1, self.curve.size + 1)

    def pick(self, criterion: str = "accuracy", rule: str = "max") -> int:
        """K̂ by ``criterion`` (:data:`CRITERIA`) and ``rule`` (:data:`RULES`; for the loss
        ``"max"`` is the argmin)."""
        if criterion not in CRITERIA:
            raise ValueError(f"criterion must be one of {CRITERIA}, got {criterion!r}")
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        table = self.k_hat if criterion == "accuracy" else self.k_hat_loss
        if table is None:
            raise ValueError("this result has no held-out loss recorded")
        return table[rule]


def holdout_split(fed: Federation, *, folds: int = 4, fold: int = 0, seed: int = 0) -> Federation:
    """Fold ``fold`` of ``fed``'s *training* data as the new *test* split (validation), the
    other folds as the new *train* split: each client's training samples are permuted
    (``default_rng(seed)``) and cut into ``folds`` near-equal chunks.  ``fed``'s test data are
    not used.  Every client needs at least ``folds`` training samples."""
    folds = positive_int("folds", folds, minimum=2)
    if not 0 <= fold < folds:
        raise ValueError(f"fold must be in [0, {folds}), got {fold}")
    tr = fed.train
    rng = np.random.default_rng(seed)
    tr_idx, va_idx = [], []
    for off, cnt in zip(tr.offsets.tolist(), tr.counts.tolist()):
        if cnt < folds:
            raise ValueError(f"a client has {cnt} training samples < folds = {folds}")
        chunks = np.array_split(off + rng.permutation(cnt), folds)
        va_idx.append(chunks[fold])
        tr_idx.append(np.concatenate([c for j, c in enumerate(chunks) if j != fold]))

    def part(idx: list[np.ndarray]) -> Split:
        counts = torch.tensor([a.size for a in idx], dtype=torch.long)
        flat = torch.as_tensor(np.concatenate(idx), device=tr.x.device)
        dev = tr.x.device
        return Split(tr.x[flat], tr.y[flat], (torch.cumsum(counts, 0) - counts).to(dev), counts.to(dev))

    return Federation(part(tr_idx), part(va_idx), fed.num_classes, f"{fed.name}-fold{fold}")


def _paired_se(correct: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """SE of ``acc(K) − acc(K*)`` (K* the argmax) per K, clients as the sampling unit:
    ``correct[K, N]`` correct predictions per client, ``counts[N]`` validation samples."""
    n = counts.size
    total = counts.sum()
    best = int(np.argmax(correct.sum(1)))
    d = correct - correct[best]                              # [K, N] per-client differences
    diff = d.sum(1) / total                                  # [K]
    resid = d - diff[:, None] * counts[None, :]
    scale = n / (n - 1) if n > 1 else 0.0
    return np.sqrt(scale * (resid ** 2).sum(1)) / total


def smooth(curve, width: int = 3) -> np.ndarray:
    """Centred moving average of ``curve`` over ``width`` (odd) neighbouring K; the window is
    truncated at the ends of the grid (the first point averages K = 1 … (width+1)/2)."""
    curve = np.asarray(curve, dtype=np.float64)
    width = positive_int("width", width)
    if width % 2 == 0:
        raise ValueError(f"width must be odd, got {width}")
    h = width // 2
    csum = np.concatenate([[0.0], np.cumsum(curve)])
    lo = np.maximum(np.arange(curve.size) - h, 0)
    hi = np.minimum(np.arange(curve.size) + h + 1, curve.size)
    return (csum[hi] - csum[lo]) / (hi - lo)


def choose(curve, se, rule: str) -> int:
    """K̂ (1-based) from a validation curve and its paired standard errors by ``rule``
    (module docstring, step 5)."""
    curve, se = np.asarray(curve, dtype=np.float64), np.asarray(se, dtype=np.float64)
    top = curve.max()
    if rule == "max":
        return int(np.flatnonzero(curve >= top - 1e-12)[0]) + 1
    if rule == "smooth":
        sm = smooth(curve, 3)
        return int(np.flatnonzero(sm >= sm.max() - 1e-12)[0]) + 1
    near = np.flatnonzero(curve >= top - se - 1e-12)
    if rule == "1se_small":
        return int(near[0]) + 1
    if rule == "1se_large":
        return int(near[-1]) + 1
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


def validation_select_k(fed: Federation, model, hyperparameters: dict, *, k_max: int,
                        warmup_rounds: int = 3, rounds: int = 3, folds: int = 4,
                        cv: int = 1, seed: int = 0, split_seed: int | None = None,
                        kmeans_restarts: int = 3,
                        progress: Callable[[int, int], None] | None = None) -> ValidationResult:
    """Held-out validation of K = 1 … ``k_max`` after short CGPFL runs (module docstring).

    ``hyperparameters``: CGPFL's (``num_contexts`` is set per K); ``seed`` the training seed,
    ``split_seed`` the seed of the fit/validation split (default ``seed``); ``cv`` how many
    of the ``folds`` serve in turn as the validation part (1: one hold-out; ``folds``: full
    cross-validation, every training sample validated once; the correct predictions are
    summed over them, the cost grows ``cv``-fold).  ``progress(done, total)``, if given, is
    called after each short run (``total = cv·k_max``: a long selection shows where it is)."""
    k_max = positive_int("k_max", k_max)
    if k_max > fed.num_clients:
        raise ValueError(f"k_max must be <= N = {fed.num_clients}, got {k_max}")
    rounds = positive_int("rounds", rounds, minimum=0)
    folds = positive_int("folds", folds, minimum=2)
    cv = positive_int("cv", cv)
    if cv > folds:
        raise ValueError(f"cv must be <= folds = {folds}, got {cv}")
    hp = {**hyperparameters, "kmeans_restarts": kmeans_restarts}
    hp.pop("num_contexts", None)
    correct = np.zeros((cv, k_max, fed.num_clients))
    loss = np.zeros((cv, k_max, fed.num_clients))
    counts = np.zeros((cv, fed.num_clients))
    warm, seconds = [], []
    for fold in range(cv):
        t0 = time.perf_counter()
        split = holdout_split(fed, folds=folds, fold=fold,
                              seed=seed if split_seed is None else split_seed)
        state = warmup(split, model, hp, warmup_rounds, seed)
        warm.append((split, state))
        n_val = split.test.counts.cpu().double().numpy()
        counts[fold] = n_val
        local = flatten(state.models["local"])
        for k in range(1, k_max + 1):
            alg = get_algorithm("cgpfl")(num_contexts=k, **hp)
            labels = kmeans(local, k, restarts=kmeans_restarts, seed=(seed + k) % 2**32).labels
            labels = torch.as_tensor(labels, device=fed.device).long()
            ctx = project(state.models["local"], assignment_matrix(labels, k, fed.dtype))
            s = state.replace(models={**state.models, "context": ctx},
                              tensors={"assignment": labels,
                                       "num_contexts": torch.tensor(k, device=fed.device)})
            for _ in range(rounds):
                s = alg.round(s, split, model)
            acc, ce = evaluate(model, alg.evaluated(s)["personalized"], split.test)
            correct[fold, k - 1] = acc.detach().cpu().double().numpy() * n_val
            loss[fold, k - 1] = ce.detach().cpu().double().numpy() * n_val  # summed per client
            if progress is not None:
                progress(fold * k_max + k, cv * k_max)
        seconds.append(time.perf_counter() - t0)
    return _result(correct, counts, tuple(warm), tuple(seconds), loss)


def _result(correct: np.ndarray, counts: np.ndarray, warm: tuple, seconds: tuple,
            loss: np.ndarray | None = None) -> ValidationResult:
    """Curves, paired SEs and every rule's K̂ of the correct predictions (and the held-out
    loss) summed over the folds."""
    tot, n = correct.sum(0), counts.sum(0)
    curve = tot.sum(1) / n.sum()
    se = _paired_se(tot, n)
    extra = {}
    if loss is not None:
        tot_loss = loss.sum(0)
        loss_curve = tot_loss.sum(1) / n.sum()
        loss_se = _paired_se(-tot_loss, n)   # the ratio estimator around the argmin of the loss
        extra = {"loss": loss, "loss_curve": loss_curve, "loss_se": loss_se,
                 "k_hat_loss": {r: choose(-loss_curve, loss_se, r) for r in RULES}}
    return ValidationResult(curve, se, {r: choose(curve, se, r) for r in RULES}, warm,
                            correct, counts, seconds, **extra)


def first_folds(res: ValidationResult, cv: int) -> ValidationResult:
    """``res`` rescored on its first ``cv`` folds only: the result ``validation_select_k``
    returns with that ``cv`` (same splits, warm-ups and seeds: fold j's run does not depend on
    how many folds follow)."""
    cv = positive_int("cv", cv)
    if res.correct is None or cv > res.correct.shape[0]:
        raise ValueError(f"cv must be <= the {0 if res.correct is None else res.correct.shape[0]} "
                         f"folds of the result, got {cv}")
    return _result(res.correct[:cv], res.counts[:cv], res.warmups[:cv], res.seconds[:cv],
                   None if res.loss is None else res.loss[:cv])


def warmup(split: Federation, model, hyperparameters: dict, rounds: int, seed: int):
    """CGPFL with K = 1 trained ``rounds`` ≥ 1 rounds on ``split``'s train part (step 2)."""
    hp = {k: v for k, v in hyperparameters.items() if k != "num_contexts"}
    alg = get_algorithm("cgpfl")(num_contexts=1, **hp)
    state = alg.init(split, model, seed)
    for _ in range(positive_int("warmup_rounds", rounds)):
        state = alg.round(state, split, model)
    return state
