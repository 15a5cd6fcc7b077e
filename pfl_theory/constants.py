"""Constants of a federation's loss that the theorems' right-hand sides need, from arrays.

Pure numpy (no engine): each function takes data or gradients and returns the constant a
bound is evaluated with, *exactly* where a closed form exists and as a stated estimate
otherwise.  Engine-needing estimators (sampled Hessians of a DNN, per-sample gradients of
an engine model) are in :mod:`verification.estimators.federation`.

* Smoothness L / strong convexity μ (pFedMe A1(a)/(b), docs/formulas.md §B.2; CGPFL
  Assumption 1, §A.6): :func:`quadratic_constants` (exact: extreme eigenvalues of the
  Hessians) and :func:`mlr_constants` (multinomial logistic regression with ℓ2: μ = the ℓ2
  weight when every parameter is regularised — the infimum of the curvature over the
  whole space, the cross-entropy part vanishing far away — and the upper bound
  L ≤ ℓ2 + ½ λ_max(X̃ᵀX̃/n), X̃ = [X, 1], from diag(p) − ppᵀ ⪯ ½ I).
* Gradient variance γ_f² (pFedMe A2) at a point: :func:`gradient_variance`;
  diversity σ_f² (A3) over sampled points: :func:`diversity_sup` (a lower estimate of the sup).
* CGPFL Definitions 2–3 (IJCAI eqs. 9–10, docs/formulas.md §A.8) for the bounded linear
  class H_r = {x ↦ ⟨θ, x⟩ : ‖θ‖ ≤ r} with the squared loss ℓ(h, y) = ½(h − y)²:
  :func:`disagreement_linear` (λ_H of a sample: exact by sign enumeration for small n,
  alternating ascent otherwise — then a lower estimate), :func:`disagreement_gaussian`
  (λ_H of N(0, Σ) in closed form), :func:`discrepancy_linear_squared` (disc_H between
  the population of a linear-Gaussian generator and a sample, exact via the trust-region
  subproblem :func:`ball_quadratic_min`), :func:`loss_range_linear_squared` and the
  smallest valid B of Theorem 4.2 (:func:`smallest_b`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pfl_theory.pfedme import gradient_diversity
from pfl_theory.validation import finite_array, nonnegative, positive, positive_int
from pfl_theory.validation import guard_public_functions


@dataclass(frozen=True)
class CurvatureConstants:
    """μ (strong convexity, 0 if not strongly convex) and L (smoothness) of a loss, with
    ``exact`` telling whether they are exact values or a valid bound/estimate."""

    mu: float
    L: float
    exact: bool
    note: str = ""


# --------------------------------------------------------------------- curvature
def quadratic_constants(hessians: Any) -> CurvatureConstants:
    """μ and L of quadratic client losses f_i(θ) = ½θᵀA_iθ − b_iᵀθ (pFedMe A1; exact).

    ``hessians`` [N, d, d] (or [d, d]) symmetric.  μ = min_i λ_min(A_i) (clipped at 0:
    negative means non-convex), L = max_i ‖A_i‖₂ (the Lipschitz constant of ∇f_i)."""
    a = finite_array("hessians", hessians)
    if a.ndim == 2:
        a = a[None]
    if a.ndim != 3 or a.shape[1] != a.shape[2]:
        raise ValueError(f"hessians must have shape [N, d, d], got {a.shape}")
    if np.abs(a - a.swapaxes(1, 2)).max() > 1e-10 * (1.0 + np.abs(a).max()):
        raise ValueError("hessians must be symmetric")
    eig = np.linalg.eigvalsh(a)
    return CurvatureConstants(mu=max(float(eig.min()), 0.0), L=float(np.abs(eig).max()),
                              exact=True, note="extreme Hessian eigenvalues")


def mlr_constants(xs: Any, *, l2: float, regularize_bias: bool = True) -> CurvatureConstants:
    """μ and L of the mean cross-entropy of multinomial logistic regression softmax(xW + b)
    plus ½ℓ2‖W‖² (and ½ℓ2‖b‖² when ``regularize_bias``), per client ``xs[i]`` [n_i, d].

    Hessian = (1/n)Σ_j (diag(p_j) − p_jp_jᵀ) ⊗ x̃_jx̃_jᵀ + ℓ2 I, x̃ = [x, 1]; since
    0 ⪯ diag(p) − ppᵀ ⪯ ½I:  L = ℓ2 + ½ max_i λ_max(X̃_iᵀX̃_i/n_i) (an upper bound, attained
    only in the limit of two equiprobable classes) and μ = ℓ2 (the infimum over parameter
    space: the cross-entropy curvature tends to 0 as ‖W‖ → ∞).  Without the bias penalty the
    loss is flat along b ↦ b + c·1 (softmax shift invariance), so μ = 0."""
    l2 = nonnegative("l2", l2)
    top = 0.0
    for i, x in enumerate(xs):
        xa = finite_array(f"xs[{i}]", x, ndim=2)
        xt = np.hstack([xa, np.ones((xa.shape[0], 1))])
        top = max(top, float(np.linalg.eigvalsh(xt.T @ xt / xa.shape[0]).max()))
    return CurvatureConstants(mu=l2 if regularize_bias else 0.0, L=l2 + 0.5 * top, exact=False,
                              note="mu exact (infimum), L an upper bound (softmax curvature <= 1/2)")


# ------------------------------------------------------------- variance, diversity
def gradient_variance(per_sample_grads: Any) -> float:
    """γ_f² at one point (pFedMe A2, docs/formulas.md §B.2): (1/n)Σ_j ‖g_j − ḡ‖² for the
    per-sample gradients ``per_sample_grads`` [n, d] of one client (the variance of a
    one-sample stochastic gradient when samples are drawn uniformly)."""
    g = finite_array("per_sample_grads", per_sample_grads, ndim=2)
    return float(((g - g.mean(0)) ** 2).sum(1).mean())


def diversity_sup(grads_at_points: Any) -> float:
    """σ_f² estimate (pFedMe A3): max over sampled points w of (1/N)Σ_i ‖∇f_i(w) − ∇f(w)‖²;
    ``grads_at_points`` [P, N, d].  A lower estimate of the sup over all w."""
    g = finite_array("grads_at_points", grads_at_points, ndim=3)
    return max(gradient_diversity(gp) for gp in g)


# ------------------------------------------------------ trust-region subproblem
def ball_quadratic_min(a: Any, b: Any, radius: float) -> tuple[float, np.ndarray]:
    """min_{‖θ‖ ≤ r} q(θ) = ½θᵀAθ − bᵀθ for symmetric A (any sign), exactly: interior
    Newton point if A ≻ 0 and ‖A⁻¹b‖ ≤ r, else the boundary solution θ = (A + νI)⁻¹b with
    ν ≥ max(0, −λ_min) solving ‖θ(ν)‖ = r (bisection to machine precision), including the
    "hard case" (b ⊥ the bottom eigenvector).  Returns (value, θ)."""
    A = finite_array("a", a, ndim=2)
    bb = finite_array("b", b, ndim=1)
    r = positive("radius", radius)
    if A.shape != (bb.size, bb.size) or np.abs(A - A.T).max() > 1e-10 * (1 + np.abs(A).max()):
        raise ValueError(f"a must be symmetric [d, d] matching b [d], got {A.shape}, {bb.shape}")
    lam, q = np.linalg.eigh(0.5 * (A + A.T))
    bt = q.T @ bb

    def value(theta: np.ndarray) -> float:
        return float(0.5 * theta @ A @ theta - bb @ theta)

    lo = max(0.0, -float(lam[0]))
    if lam[0] > 0:
        inner = np.linalg.solve(A, bb)
        if np.linalg.norm(inner) <= r:
            return value(inner), inner
    scale = 1.0 + float(np.abs(lam).max())
    tiny = 1e-14 * scale
    nearly = np.abs(lam + lo) <= tiny
    rest = ~nearly
    if np.all(np.abs(bt[nearly]) <= 1e-12 * (1 + np.abs(bt).max())):
        # hard case candidate: ν = lo; complete along the bottom eigenspace if short of r
        coef = np.zeros_like(bt)
        coef[rest] = bt[rest] / (lam[rest] + lo)
        short = r ** 2 - float((coef ** 2).sum())
        if short >= 0:
            coef[np.flatnonzero(nearly)[0]] = math.sqrt(short)
            theta = q @ coef
            return value(theta), theta

    def norm(nu: float) -> float:
        return math.sqrt(float(((bt / (lam + nu)) ** 2).sum()))

    left, right = lo + tiny, lo + float(np.linalg.norm(bb)) / r + scale
    while norm(right) > r:
        right *= 2
    for _ in range(200):
        mid = 0.5 * (left + right)
        if norm(mid) > r:
            left = mid
        else:
            right = mid
    theta = q @ (bt / (lam + right))
    theta *= r / max(np.linalg.norm(theta), 1e-300)
    return value(theta), theta


# ----------------------------------------------- CGPFL Definitions 2–3, constant B
def disagreement_linear(x: Any, *, radius: float, exact_max_n: int = 16,
                        restarts: int = 20, seed: int = 0) -> tuple[float, bool]:
    """λ_H(D) (CGPFL Definition 2, IJCAI eq. 9) for H_r = {⟨θ, ·⟩ : ‖θ‖ ≤ r} on the sample
    ``x`` [n, d]:  sup_{h1,h2} (1/n)Σ|h1(x_j) − h2(x_j)| = 2r · max_{‖u‖=1} (1/n)Σ|⟨u, x_j⟩|
    = (2r/n) · max_{s∈{±1}ⁿ} ‖Xᵀs‖.  Exact by enumerating sign vectors when n ≤
    ``exact_max_n``; otherwise alternating ascent s = sign(Xu), u = Xᵀs/‖Xᵀs‖ from
    ``restarts`` seeded starts (a lower estimate).  Returns (value, exact)."""
    xa = finite_array("x", x, ndim=2)
    r = positive("radius", radius)
    n = xa.shape[0]
    if n <= positive_int("exact_max_n", exact_max_n):
        best = max(float(np.linalg.norm(xa.T @ np.array((1.0,) + s)))
                   for s in itertools.product((1.0, -1.0), repeat=n - 1))  # s and −s agree
        return 2 * r * best / n, True
    rng = np.random.default_rng(seed)
    best = 0.0
    for _ in range(positive_int("restarts", restarts)):
        u = rng.normal(size=xa.shape[1])
        for _ in range(100):
            s = np.where(xa @ u >= 0, 1.0, -1.0)
            v = xa.T @ s
            nv = float(np.linalg.norm(v))
            if nv == 0:
                break
            u_new = v / nv
            if np.allclose(u_new, u, rtol=0, atol=1e-14):
                break
            u = u_new
        best = max(best, float(np.abs(xa @ u).sum()) / float(np.linalg.norm(u)))
    return 2 * r * best / n, False


def disagreement_gaussian(*, radius: float, cov: Any) -> float:
    """λ_H(D) for D = N(0, Σ) and H_r (population form of Definition 2): E|⟨u, x⟩| =
    √(2/π)·√(uᵀΣu), so sup = 2r·√(2/π)·√λ_max(Σ)."""
    c = finite_array("cov", cov, ndim=2)
    return 2 * positive("radius", radius) * math.sqrt(2 / math.pi) * math.sqrt(
        float(np.linalg.eigvalsh(c).max()))


def _population_and_sample(x, y, w, cov, noise_var):
    xa = finite_array("x", x, ndim=2)
    ya = finite_array("y", y, ndim=1)
    wa = finite_array("w", w, ndim=1)
    c = finite_array("cov", cov, ndim=2)
    if xa.shape[0] != ya.size or xa.shape[1] != wa.size or c.shape != (wa.size, wa.size):
        raise ValueError("x [n, d], y [n], w [d], cov [d, d] must agree")
    return xa, ya, wa, c, nonnegative("noise_var", noise_var)


def discrepancy_linear_squared(x: Any, y: Any, *, w: Any, cov: Any, noise_var: float,
                               radius: float) -> float:
    """disc_H(D, D̃) (CGPFL Definition 3, IJCAI eq. 10) = sup_{‖θ‖≤r} |L_D(θ) − L_D̃(θ)| for
    ℓ = ½(⟨θ, x⟩ − y)², D: x ~ N(0, Σ), y = ⟨w, x⟩ + ε, Var ε = σ² (exact population
    loss ½(θᵀΣθ − 2θᵀΣw + wᵀΣw + σ²)) and D̃ the sample (x [n, d], y [n]).  The difference is
    a quadratic in θ; its sup of |·| over the ball is exact by :func:`ball_quadratic_min`."""
    xa, ya, wa, c, s2 = _population_and_sample(x, y, w, cov, noise_var)
    n = xa.shape[0]
    A = c - xa.T @ xa / n
    bvec = c @ wa - xa.T @ ya / n
    const = 0.5 * (wa @ c @ wa + s2 - float((ya ** 2).mean()))
    lo, _ = ball_quadratic_min(A, bvec, radius)
    hi, _ = ball_quadratic_min(-A, -bvec, radius)
    return max(abs(lo + const), abs(-hi + const))


def loss_range_linear_squared(*, w: Any, cov: Any, noise_var: float, radius: float
                              ) -> tuple[float, float]:
    """(min, max) over H_r of the population loss L_D(θ) = ½(θᵀΣθ − 2θᵀΣw + wᵀΣw + σ²)."""
    wa = finite_array("w", w, ndim=1)
    c = finite_array("cov", cov, ndim=2)
    const = 0.5 * (wa @ c @ wa + nonnegative("noise_var", noise_var))
    lo, _ = ball_quadratic_min(c, c @ wa, radius)
    hi, _ = ball_quadratic_min(-c, -(c @ wa), radius)
    return lo + const, -hi + const


def smallest_b(loss_range: float, disagreement: float) -> float:
    """The smallest B of Theorem 4.2 with |L_D(h1) − L_D(h2)| ≤ B λ_H(D) for all h1, h2 ∈ H:
    B = (max_H L_D − min_H L_D)/λ_H(D).  Note B·λ_H(D) is then exactly the loss range, so
    the theorem's term 2Bλ_H(D_i) alone is twice what any h ∈ H trivially guarantees."""
    return nonnegative("loss_range", loss_range) / positive("disagreement", disagreement)


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
