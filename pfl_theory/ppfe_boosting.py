"""PPFE boosting math: sample reweighting (eq. 7), ensemble coefficients, final ensemble (eq. 8).

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), §4.2 and Algorithm 1; docs/formulas.md §C.3
(RECONSTRUCTED: a per-client exponential reweighting with an inverse temperature β,
renormalised per client; accuracy-based per-client coefficients; a weighted sum of the stage
models).  Pure torch, batched over clients, device/dtype follow the inputs.

**Layout.** Per-client sample quantities are padded tensors ``[N, n_max]`` with a boolean
``mask [N, n_max]`` (True = real sample); padded entries get weight 0 and are ignored.
(A flat federation with offsets converts with one gather ``x[offsets[:, None] + arange]``.)
``mask=None`` means every entry is real.

Also :func:`adaboost_stumps`: discrete AdaBoost with decision stumps built from these pieces
(batched over clients) — the reference run for Theorem 2 (eq. 14).
"""

from __future__ import annotations

import math

import torch

from pfl_theory.validation import positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["uniform_weights", "weighted_error", "reweight", "ensemble_coefficients",
           "final_ensemble", "fit_stumps", "adaboost_stumps"]


def _mask(like: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return torch.ones_like(like, dtype=torch.bool)
    if mask.shape != like.shape:
        raise ValueError(f"mask shape {tuple(mask.shape)} != {tuple(like.shape)}")
    return mask.to(device=like.device, dtype=torch.bool)


def uniform_weights(mask: torch.Tensor, *, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """π^{(0)}_{i,j} = 1/n_i on real samples, 0 on padding (eq. 2 with omitted π)."""
    m = mask.to(torch.bool)
    counts = m.sum(dim=-1, keepdim=True)
    if torch.any(counts == 0):
        raise ValueError("every client needs at least one sample")
    return m.to(dtype) / counts.to(dtype)


def weighted_error(weights: torch.Tensor, scores: torch.Tensor,
                   mask: torch.Tensor | None = None) -> torch.Tensor:
    """ε^{(t)}_i = Σ_j π^{(t)}_{i,j} s^{(t)}_{i,j} (§C.3); scores are 0-1 misses or losses. [N]"""
    m = _mask(weights, mask)
    return torch.where(m, weights * scores, torch.zeros_like(weights)).sum(dim=-1)


def reweight(weights: torch.Tensor, scores: torch.Tensor, *, beta: float | torch.Tensor,
             mask: torch.Tensor | None = None) -> torch.Tensor:
    """Eq. (7) of PPFE (RECONSTRUCTED, §C.3): π'_{i,j} ∝ π_{i,j} exp(β_i s_{i,j}), Σ_j π'_{i,j} = 1.

    ``weights`` π [N, n_max] (≥ 0, positive mass per client), ``scores`` s [N, n_max] (0-1 miss
    indicator, or a per-sample loss), ``beta`` inverse temperature ≥ 0, scalar or per-client
    [N] (classical AdaBoost: s = 1[miss], β_i = 2α_i).  β = 0 leaves π unchanged.  Computed
    in log space (softmax), so large β·s does not overflow."""
    if weights.shape != scores.shape or weights.ndim != 2:
        raise ValueError(f"weights and scores must both be [N, n_max], got "
                         f"{tuple(weights.shape)} and {tuple(scores.shape)}")
    m = _mask(weights, mask) & (weights > 0)
    if torch.any(weights < 0) or not torch.all(torch.isfinite(weights)):
        raise ValueError("weights must be finite and >= 0")
    if torch.any(~m.any(dim=-1)):
        raise ValueError("every client needs positive total weight")
    b = torch.as_tensor(beta, dtype=weights.dtype, device=weights.device)
    if torch.any(b < 0) or not torch.all(torch.isfinite(b)):
        raise ValueError("beta must be finite and >= 0")
    b = b.reshape(-1, 1) if b.ndim == 1 else b
    logits = torch.log(torch.where(m, weights, torch.ones_like(weights))) + b * scores
    logits = torch.where(m, logits, torch.full_like(logits, -math.inf))
    return torch.softmax(logits, dim=-1)


def ensemble_coefficients(errors: torch.Tensor, *, num_classes: int = 2, rule: str = "samme",
                          clip: float = 1e-10) -> torch.Tensor:
    """Per-client stage coefficients α^{(t)}_i from weighted errors ε^{(t)}_i (§C.3):
    ``"adaboost"`` ½ log((1−ε)/ε) (binary); ``"samme"`` log((1−ε)/ε) + log(C−1) (multi-class
    SAMME, Zhu et al. 2009; = 2 × AdaBoost at C = 2).  ε is clipped to [clip, 1−clip] so a
    perfect stage gets a large finite coefficient (clip is raised to the dtype's machine
    epsilon, e.g. 1.2e-7 in float32).  Shape follows ``errors``."""
    c = positive_int("num_classes", num_classes, minimum=2)
    if rule not in ("samme", "adaboost"):
        raise ValueError(f"rule must be 'samme' or 'adaboost', got {rule!r}")
    if not 0 < clip < 0.5:
        raise ValueError(f"clip must lie in (0, 0.5), got {clip!r}")
    e = torch.as_tensor(errors)
    if torch.any((e < 0) | (e > 1)) or not torch.all(torch.isfinite(e)):
        raise ValueError("errors must lie in [0, 1]")
    if not e.is_floating_point():
        e = e.to(torch.float64)
    clip = max(clip, float(torch.finfo(e.dtype).eps))  # 1 − clip must be < 1 in e's dtype
    e = e.clamp(clip, 1 - clip)
    logit = torch.log((1 - e) / e)
    return 0.5 * logit if rule == "adaboost" else logit + math.log(c - 1)


def final_ensemble(stage_outputs: torch.Tensor, coefficients: torch.Tensor, *,
                   normalize: bool = False) -> torch.Tensor:
    """Eq. (8) of PPFE (RECONSTRUCTED): H_i(x) = Σ_t α^{(t)}_i h^{(t)}_i(x).

    ``stage_outputs`` [T, N, ...] (scores, one-hot votes for SAMME, or regression outputs),
    ``coefficients`` [T, N]; ``normalize=True`` divides by Σ_t α^{(t)}_i (the optional
    normalised form).  Returns [N, ...]; classify with ``argmax(dim=-1)``."""
    if coefficients.shape != stage_outputs.shape[:2]:
        raise ValueError(f"coefficients must be [T, N] = {tuple(stage_outputs.shape[:2])}, "
                         f"got {tuple(coefficients.shape)}")
    a = coefficients.to(stage_outputs.dtype)
    if normalize:
        a = a / a.sum(dim=0, keepdim=True)
    a = a.reshape(a.shape + (1,) * (stage_outputs.ndim - 2))
    return (a * stage_outputs).sum(dim=0)


def fit_stumps(x: torch.Tensor, y: torch.Tensor, weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Best weighted decision stump h(x) = p · sign(x_f − θ) per client (batched).

    ``x [N, n, d]``, ``y [N, n]`` in {−1, +1}, ``weights [N, n]``.  Thresholds are midpoints
    between sorted values (plus ±inf); assumes no ties within a feature (continuous data) and
    weights summing to 1 per client.  Returns ``(feature [N], threshold [N], polarity [N],
    error [N])``."""
    n_clients, n, d = x.shape
    xs, order = torch.sort(x, dim=1)  # [N, n, d]
    yw = (y * weights)[:, :, None].expand(n_clients, n, d)
    yws = torch.gather(yw, 1, order)
    pos_total = (weights * (y > 0)).sum(dim=1)[:, None, None]  # weight of y = +1
    # threshold after k sorted samples (k = 0..n), polarity +1 predicts +1 above it:
    # error = W(y=+1, below) + W(y=−1, above) = W(y=−1) + Σ_{j<k} y_j w_j  (weights sum to 1)
    cum = torch.cat([torch.zeros_like(yws[:, :1]), torch.cumsum(yws, dim=1)], dim=1)
    err_pos = (1 - pos_total) + cum
    err_all = torch.stack([err_pos, 1 - err_pos], dim=0)  # polarity +1, −1 (weights sum 1)
    flat = err_all.permute(1, 0, 2, 3).reshape(n_clients, -1)
    best = torch.argmin(flat, dim=1)
    pol_idx, rest = best // ((n + 1) * d), best % ((n + 1) * d)
    k, f = rest // d, rest % d
    rows = torch.arange(n_clients, device=x.device)
    lo = torch.where(k > 0, xs[rows, (k - 1).clamp(min=0), f], torch.full_like(xs[:, 0, 0], -math.inf))
    hi = torch.where(k < n, xs[rows, k.clamp(max=n - 1), f], torch.full_like(xs[:, 0, 0], math.inf))
    thr = torch.where(torch.isinf(lo), lo, torch.where(torch.isinf(hi), lo + 1.0, (lo + hi) / 2))
    polarity = 1.0 - 2.0 * pol_idx.to(x.dtype)
    return f, thr, polarity, flat[rows, best]


def _stump_predict(x, f, thr, pol):
    rows = torch.arange(x.shape[0], device=x.device)
    xf = x[rows, :, f] if x.ndim == 3 else x
    return pol[:, None] * torch.where(xf > thr[:, None], 1.0, -1.0).to(x.dtype)


def adaboost_stumps(x: torch.Tensor, y: torch.Tensor, *, num_rounds: int) -> dict[str, torch.Tensor]:
    """Discrete AdaBoost with stumps for N clients at once (reference for Theorem 2, eq. 14):
    uniform π, then per round the best stump, ε_t, α_t = ½ log((1−ε_t)/ε_t) and eq. (7) with
    s = 1[miss], β = 2α_t.  Returns ``errors [T, N]``, ``alphas [T, N]``, ``train_error [T, N]``
    (0-1 error of sign(Σ_{s≤t} α_s h_s))."""
    t_max = positive_int("num_rounds", num_rounds)
    w = uniform_weights(torch.ones_like(y, dtype=torch.bool), dtype=x.dtype)
    margin = torch.zeros_like(y, dtype=x.dtype)
    errs, alphas, train = [], [], []
    for _ in range(t_max):
        f, thr, pol, _ = fit_stumps(x, y, w)
        h = _stump_predict(x, f, thr, pol)
        miss = (h != y).to(x.dtype)
        eps = weighted_error(w, miss)
        alpha = ensemble_coefficients(eps, rule="adaboost")
        w = reweight(w, miss, beta=2 * alpha)
        margin = margin + alpha[:, None] * h
        errs.append(eps)
        alphas.append(alpha)
        train.append((torch.sign(margin) != y).to(x.dtype).mean(dim=1))
    return {"errors": torch.stack(errs), "alphas": torch.stack(alphas),
            "train_error": torch.stack(train)}


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
