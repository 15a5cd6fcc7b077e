"""Complexity and generalization estimators that the ``bound`` checks measure against.

Every function here *measures* a quantity that a theorem bounds (PPFE Lemmas 4, 6, 8 and
Theorem 7; PLGU Lemmas 2–4 and Theorems 1–3; docs/formulas.md §C.5, §D.8), and says which
side of the true value its estimate lies on — a bound check is only meaningful against a
measurement that cannot overshoot the truth:

* :func:`rademacher_linear` / :func:`rademacher_linear_exact` — empirical Rademacher
  complexity of the ℓ_p ball {x ↦ ⟨w, x⟩ : ‖w‖_p ≤ M}: the supremum is the dual norm,
  (M/m) ‖Σ_j ε_j x_j‖_q with 1/p + 1/q = 1, so Monte Carlo over sign vectors is unbiased
  (and exact enumeration of all 2^m sign vectors is the reference for small m);
* :func:`rademacher_mlp_lower` — bias-free ReLU networks with spectral-norm bounds ‖W_l‖₂ ≤ M_l:
  the supremum over networks is approximated by gradient ascent per sign vector, so the
  result is a **lower estimate** (every evaluated network is feasible);
* :func:`greedy_cover` / :func:`covering_estimates` — empirical covering numbers of a
  finite sample of functions (rows of a value matrix on a sample of points), sup-norm on
  the sample: a greedy 2ε-separated set gives a **lower bound** on N(F, ε) (no ε-ball can
  hold two points more than 2ε apart), the greedy ε-net an upper estimate for the sample;
* :func:`generalization_gap` — held-out minus training loss with its standard error (large
  held-out sample); :func:`linear_excess_risk` — the exact excess risk (ŵ − w)ᵀ Σ (ŵ − w)
  for PPFE's linear generator (synthetic/linear.py, eq. 15).

float64 throughout; seeds are explicit.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

import numpy as np

from pfl_theory.validation import finite_array, positive, positive_int

__all__ = ["affine_log_covering_lower", "dual_exponent", "rademacher_linear", "rademacher_linear_exact",
           "mlp_forward", "rademacher_mlp_lower", "greedy_cover", "covering_estimates",
           "generalization_gap", "linear_excess_risk"]

MAX_EXACT_SIGNS = 20  # 2^20 sign vectors: the largest exact enumeration we allow


def dual_exponent(p: float) -> float:
    """q with 1/p + 1/q = 1 for p in [1, ∞] (p = 1 ↦ ∞, p = ∞ ↦ 1)."""
    p = float(p)
    if math.isnan(p) or p < 1:
        raise ValueError(f"norm p must lie in [1, inf], got {p!r}")
    if p == 1:
        return math.inf
    return 1.0 if math.isinf(p) else p / (p - 1.0)


def _linear_sup(eps: np.ndarray, x: np.ndarray, radius: float, p: float) -> np.ndarray:
    q = dual_exponent(p)
    return radius / x.shape[0] * np.linalg.norm(eps @ x, ord=q, axis=1)


def rademacher_linear(x: Any, *, radius: float, p: float = 2.0, n_draws: int,
                      seed: int) -> tuple[float, float]:
    """Empirical Rademacher complexity R̂_S = E_ε sup_{‖w‖_p ≤ M} (1/m) Σ_j ε_j ⟨w, x_j⟩ of
    the ℓ_p ball of radius M = ``radius`` on ``x [m, k]``: the sup is the dual norm
    (M/m)‖Σ_j ε_j x_j‖_q, so each draw is exact and the mean over ``n_draws`` sign vectors
    is unbiased.  Returns (estimate, standard error)."""
    x = finite_array("x", x, ndim=2)
    m = positive("radius", radius)
    n = positive_int("n_draws", n_draws, minimum=2)
    eps = np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(n, x.shape[0]))
    vals = _linear_sup(eps, x, m, p)
    return float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(n))


def rademacher_linear_exact(x: Any, *, radius: float, p: float = 2.0) -> float:
    """R̂_S of the ℓ_p ball by enumerating all 2^m sign vectors (m ≤ 20): the reference
    for :func:`rademacher_linear` and :func:`rademacher_mlp_lower` at depth 1."""
    x = finite_array("x", x, ndim=2)
    if x.shape[0] > MAX_EXACT_SIGNS:
        raise ValueError(f"x has {x.shape[0]} rows; exact enumeration allows at most "
                         f"{MAX_EXACT_SIGNS}")
    eps = np.array(list(itertools.product((-1.0, 1.0), repeat=x.shape[0])))
    return float(_linear_sup(eps, x, positive("radius", radius), p).mean())


def _check_widths(widths: Sequence[int], spectral_bounds: Sequence[float]) -> tuple[list[int], np.ndarray]:
    w = [positive_int(f"widths[{k}]", v) for k, v in enumerate(widths)]
    mb = finite_array("spectral_bounds", spectral_bounds, ndim=1)
    if len(w) < 2 or w[-1] != 1:
        raise ValueError(f"widths must be [d_0, ..., d_L] with d_L = 1, got {list(widths)}")
    if mb.size != len(w) - 1 or np.any(mb <= 0):
        raise ValueError(f"spectral_bounds must hold {len(w) - 1} positive numbers, got "
                         f"{list(spectral_bounds)}")
    return w, mb


def mlp_forward(weights: Sequence[Any], x: Any) -> Any:
    """Bias-free ReLU network x ↦ W_L relu(… relu(W_1 x)) (PLGU Lemma 2's class, σ(0) = 0),
    batched: ``weights[l] [..., d_{l+1}, d_l]``, ``x [m, d_0]`` → outputs ``[..., m]``."""
    import torch

    a = torch.as_tensor(x).T  # [d_0, m]
    for l, w in enumerate(weights):
        a = w @ a
        if l < len(weights) - 1:
            a = torch.relu(a)
    return a[..., 0, :]


def rademacher_mlp_lower(x: Any, *, widths: Sequence[int], spectral_bounds: Sequence[float],
                         n_draws: int, steps: int = 200, restarts: int = 2, lr: float = 0.3,
                         seed: int) -> tuple[float, float]:
    """A **lower estimate** of R̂_S for {x ↦ W_L relu(… relu(W_1 x)) : ‖W_l‖₂ ≤ M_l}.

    For each of ``n_draws`` sign vectors ε, gradient ascent on (1/m) Σ_j ε_j f(x_j) over the
    weights (``restarts`` random starts, batched; per-layer normalised steps of size
    ``lr``·M_l with cosine decay), each step followed by rescaling W_l onto its spectral
    sphere (the supremum lies there, by homogeneity).  The value reported per ε is |objective| at the best network
    rescaled to ‖W_l‖₂ = M_l: feasible (so ≤ the true supremum), and no smaller than the
    ascent's value (the class is symmetric under W_L ↦ −W_L and the objective is positively
    homogeneous in each W_l).  Returns (mean over ε, standard error); float64."""
    import torch

    x = finite_array("x", x, ndim=2)
    w_list, mb = _check_widths(widths, spectral_bounds)
    if x.shape[1] != w_list[0]:
        raise ValueError(f"x has {x.shape[1]} columns but widths[0] = {w_list[0]}")
    n = positive_int("n_draws", n_draws, minimum=2)
    r = positive_int("restarts", restarts)
    gen = torch.Generator().manual_seed(int(seed))
    eps = torch.where(torch.rand(n, 1, x.shape[0], generator=gen) < 0.5, -1.0, 1.0).double()
    xt = torch.as_tensor(x, dtype=torch.float64)
    bounds = torch.as_tensor(mb, dtype=torch.float64)

    vecs: list = [None] * len(bounds)  # power-iteration vectors, warm-started per step

    def rescale(ws: list, exact: bool = False) -> list:
        """W_l · M_l / ‖W_l‖₂: exact (SVD) at the end, warm-started power iteration while
        ascending (any positive rescaling keeps the ascent valid; only the end must be
        feasible)."""
        out = []
        for k, (w, bound) in enumerate(zip(ws, bounds)):
            if exact:
                s = torch.linalg.matrix_norm(w, ord=2)
            else:
                v = vecs[k] if vecs[k] is not None else torch.ones(*w.shape[:-2], w.shape[-1],
                                                                     dtype=w.dtype)
                for _ in range(3):
                    v = (w.transpose(-1, -2) @ (w @ v[..., None]))[..., 0]
                    v = v / torch.linalg.vector_norm(v, dim=-1, keepdim=True).clamp_min(1e-300)
                vecs[k] = v
                s = torch.linalg.vector_norm(w @ v[..., None], dim=(-2, -1))
            out.append(w * (bound / s.clamp_min(1e-300))[..., None, None])
        return out

    params = [torch.randn(n, r, w_list[l + 1], w_list[l], generator=gen, dtype=torch.float64)
              for l in range(len(w_list) - 1)]
    with torch.no_grad():
        params = rescale(params, exact=True)
    for p in params:
        p.requires_grad_(True)
    n_steps = positive_int("steps", steps, minimum=0)
    for k in range(n_steps):
        obj = (eps * mlp_forward(params, xt)).mean(-1)  # [n, r]
        grads = torch.autograd.grad(obj.sum(), params)
        step = lr * 0.5 * (1 + math.cos(math.pi * k / max(n_steps, 1)))  # cosine decay
        with torch.no_grad():
            new = []
            for p, g, bound in zip(params, grads, bounds):
                gn = torch.linalg.matrix_norm(g)[..., None, None].clamp_min(1e-300)
                new.append(p + step * bound * g / gn)  # normalised ascent step per layer
            for p, q in zip(params, rescale(new)):  # back onto ‖W_l‖₂ = M_l
                p.copy_(q)
    with torch.no_grad():
        val = (eps * mlp_forward(rescale(params, exact=True), xt)).mean(-1).abs()
        best = val.max(dim=1).values.numpy()
    return float(best.mean()), float(best.std(ddof=1) / math.sqrt(n))


def greedy_cover(values: Any, radius: float) -> np.ndarray:
    """Indices of a greedy sup-norm cover of the rows of ``values [K, n]`` (functions on a
    sample of n points): a row becomes a centre iff it is more than ``radius`` from every
    earlier centre.  The centres are pairwise > ``radius`` apart and every row lies within
    ``radius`` of one."""
    v = finite_array("values", values, ndim=2)
    rad = positive("radius", radius)
    centres: list[int] = []
    dist = np.full(v.shape[0], np.inf)  # distance of each row to the nearest centre
    for k in range(v.shape[0]):
        if dist[k] > rad:
            centres.append(k)
            dist = np.minimum(dist, np.abs(v - v[k]).max(axis=1))
    return np.asarray(centres, dtype=int)


def covering_estimates(values: Any, eps: float) -> dict[str, float]:
    """Empirical covering numbers at radius ε = ``eps`` of the functions ``values [K, n]``
    (sup norm on the sample), in natural logs:

    * ``lower`` / ``log_lower`` = size / log of a greedy 2ε-separated subset: any ε-cover of the class (internal
      or external) needs one centre per separated point, so N(F, ε) ≥ this (a lower
      estimate of the true number — what an upper bound must dominate);
    * ``sample_cover`` / ``log_sample_cover`` = the greedy ε-net of the sampled functions (an upper
      estimate of N for the *sample*, not for the class).
    """
    e = positive("eps", eps)
    lower, sample = len(greedy_cover(values, 2 * e)), len(greedy_cover(values, e))
    return {"lower": lower, "sample_cover": sample, "log_lower": math.log(lower),
            "log_sample_cover": math.log(sample)}


def affine_log_covering_lower(dim: int, *, coef_bound: float, input_bound: float,
                              eps: float) -> float:
    """Exact lower bound on log N(F, ε, ‖·‖_∞) for the affine class F = {x ↦ wᵀx + b : every
    coefficient in [−M, M]} on the input box [−B, B]^d (M = ``coef_bound``, B = ``input_bound``,
    d = ``dim``), for covers with centres anywhere.

    On this class ‖f − f'‖_∞ = B‖w − w'‖₁ + |b − b'| (the sup over the box is at a corner), a
    norm ν on R^{d+1}.  Each cover element's ε-ball meets F in a set of ν-diameter ≤ 2ε, whose
    volume is at most that of a ν-ball of radius ε (Brunn–Minkowski: vol(S − S) ≥ 2^{d+1}
    vol(S)).  So N ≥ vol([−M, M]^{d+1}) / vol(ν-ball of radius ε) = (2M)^{d+1} (d+1)! B^d /
    (2ε)^{d+1}:  log N ≥ (d+1) log(M/ε) + log((d+1)!) + d log B  (0 when that is negative)."""
    d = int(dim)
    if d < 1 or not (coef_bound > 0 and input_bound > 0 and eps > 0):
        raise ValueError(f"need dim >= 1 and positive coef_bound, input_bound, eps; got "
                         f"{dim}, {coef_bound}, {input_bound}, {eps}")
    value = ((d + 1) * math.log(coef_bound / eps) + math.lgamma(d + 2)
             + d * math.log(input_bound))
    return max(value, 0.0)


def generalization_gap(train_losses: Any, heldout_losses: Any) -> tuple[float, float]:
    """Measured gap = mean held-out loss − mean training loss, with the standard error of
    the held-out mean (the training mean is exact for the trained model).  Use a held-out
    sample much larger than the training sample."""
    tr = finite_array("train_losses", train_losses).ravel()
    ho = finite_array("heldout_losses", heldout_losses).ravel()
    if tr.size == 0 or ho.size < 2:
        raise ValueError("need >= 1 training loss and >= 2 held-out losses")
    return float(ho.mean() - tr.mean()), float(ho.std(ddof=1) / math.sqrt(ho.size))


def linear_excess_risk(w_hat: Any, w_true: Any, cov_diag: Any) -> np.ndarray:
    """Exact excess population MSE (ŵ_i − w_i)ᵀ Σ_i (ŵ_i − w_i) per client for PPFE's
    linear generator with diagonal Σ_i (eq. 15; population MSE = σ_ε² + this)."""
    wh = finite_array("w_hat", w_hat, ndim=2)
    wt = finite_array("w_true", w_true, ndim=2)
    cd = finite_array("cov_diag", cov_diag, ndim=2)
    if not (wh.shape == wt.shape == cd.shape):
        raise ValueError(f"w_hat {wh.shape}, w_true {wt.shape}, cov_diag {cd.shape} must match")
    return np.sum(cd * (wh - wt) ** 2, axis=1)
