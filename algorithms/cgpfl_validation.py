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
   the largest such K.  Under-selecting K costs far more than over-selecting on the
   selection benchmark (docs/selection.md), which is what the rules are measured on.

Cost: ``warmup_rounds + k_max·rounds`` CGPFL rounds on (folds−1)/folds of the data, against
``k_max·T`` for training the whole K grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from algorithms.base import flatten, get_algorithm
from algorithms.cgpfl import assignment_matrix, project
from algorithms.evaluation import evaluate
from pfl_theory.kmeans import kmeans
from pfl_theory.validation import positive_int
from synthetic.federation import Federation, Split

__all__ = ["RULES", "ValidationResult", "holdout_split", "choose", "validation_select_k"]

RULES = ("max", "1se_small", "1se_large")


@dataclass(frozen=True)
class ValidationResult:
    """Validation accuracy ``curve[K−1]`` for K = 1 … k_max, the paired standard error
    ``se[K−1]`` of ``curve[K−1] − max(curve)``, the K chosen by each rule (``k_hat``) and
    the (fit/validation split, warm-up state) of each fold used (``warmups``)."""

    curve: np.ndarray
    se: np.ndarray
    k_hat: dict
    warmups: tuple = ()   # (split, K = 1 warm-up state) per validation fold used

    @property
    def ks(self) -> np.ndarray:
        return np.arange(1, self.curve.size + 1)


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


def choose(curve, se, rule: str) -> int:
    """K̂ (1-based) from a validation curve and its paired standard errors by ``rule``
    (module docstring, step 5)."""
    curve, se = np.asarray(curve, dtype=np.float64), np.asarray(se, dtype=np.float64)
    top = curve.max()
    if rule == "max":
        return int(np.flatnonzero(curve >= top - 1e-12)[0]) + 1
    near = np.flatnonzero(curve >= top - se - 1e-12)
    if rule == "1se_small":
        return int(near[0]) + 1
    if rule == "1se_large":
        return int(near[-1]) + 1
    raise ValueError(f"rule must be one of {RULES}, got {rule!r}")


def validation_select_k(fed: Federation, model, hyperparameters: dict, *, k_max: int,
                        warmup_rounds: int = 3, rounds: int = 3, folds: int = 4,
                        cv: int = 1, seed: int = 0, split_seed: int | None = None,
                        kmeans_restarts: int = 3) -> ValidationResult:
    """Held-out validation of K = 1 … ``k_max`` after short CGPFL runs (module docstring).

    ``hyperparameters``: CGPFL's (``num_contexts`` is set per K); ``seed`` the training seed,
    ``split_seed`` the seed of the fit/validation split (default ``seed``); ``cv`` how many
    of the ``folds`` serve in turn as the validation part (1: one hold-out; ``folds``: full
    cross-validation, every training sample validated once; the correct predictions are
    summed over them, the cost grows ``cv``-fold)."""
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
    correct = np.zeros((k_max, fed.num_clients))
    counts = np.zeros(fed.num_clients)
    warm = []
    for fold in range(cv):
        split = holdout_split(fed, folds=folds, fold=fold,
                              seed=seed if split_seed is None else split_seed)
        state = warmup(split, model, hp, warmup_rounds, seed)
        warm.append((split, state))
        n_val = split.test.counts.cpu().double().numpy()
        counts += n_val
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
            acc, _ = evaluate(model, alg.evaluated(s)["personalized"], split.test)
            correct[k - 1] += acc.detach().cpu().double().numpy() * n_val
    curve = correct.sum(1) / counts.sum()
    se = _paired_se(correct, counts)
    return ValidationResult(curve, se, {r: choose(curve, se, r) for r in RULES}, tuple(warm))


def warmup(split: Federation, model, hyperparameters: dict, rounds: int, seed: int):
    """CGPFL with K = 1 trained ``rounds`` ≥ 1 rounds on ``split``'s train part (step 2)."""
    hp = {k: v for k, v in hyperparameters.items() if k != "num_contexts"}
    alg = get_algorithm("cgpfl")(num_contexts=1, **hp)
    state = alg.init(split, model, seed)
    for _ in range(positive_int("warmup_rounds", rounds)):
        state = alg.round(state, split, model)
    return state
