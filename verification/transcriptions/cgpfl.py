"""CGPFL's formulas written a second time, straight from the paper's statements.

Paper: X. Tang, S. Guo, J. Guo, *Personalized Federated Learning with Contextualized
Generalization*, IJCAI 2022 (ICLR-2022 submission *… with Clustered Generalization* for the
appendix).  Transcribed from the formula specification (docs/formulas.md §A.2–§A.9), not from
:mod:`pfl_theory.cgpfl`; the identity checks (:mod:`verification.checks.transcriptions_cgpfl`)
compare the two writings at random points.  Readings (the ones docs/formulas.md documents):

* Theorem 4.1 (IJCAI) = Theorem 1 (ICLR): α̂₀'s second entry with √ over 4/3 only (the form
  consistent with C₁, C₂), ρ_Ω², ρ_g² squared, Δ_G as printed (final iterate), hidden
  O-constants 1 beyond the printed 48, 80√26, 52; part (b) adds δ_G²/λ² + δ²;
* the pre-optimisation bound of ICLR appendix A.3 with C₁ = 32ρ_Ω²/K, C₂ = 24ρ_g²/K,
  C₃ = 832δ²L_G²/(KNR); the step-size condition β ≤ 1/(2√(R(R+1))L_G);
* Theorem 4.2 (IJCAI) = Theorem 2 (ICLR): ĥ* with (λ/2)‖θ−ω‖² (§A.11), hence the factor
  (λ + L/2); IJCAI order of terms; cost(Θ*, Ω*; K) = Σ_i (m_i/m) min_k ‖θ_i − ω_k‖²;
* eq. (11) (IJCAI) / (12) (ICLR): e(K) = √((dK/m) log(em/d)) + μ·cost(K), K̂ = argmin e(K)
  over K = 1 … N/2, smallest K on ties;
* eq. (2)'s lower level with p_{k,j} = 1/|C_k|, q_k = |C_k|/N; the local step's gradient
  ∇_{ω_i}G of G = (1/N) Σ_j ‖θ_j − ω_{k(j)}‖² (Algorithm 1, §A.5), obtained here by sympy
  differentiation.

The symbols are named like the keyword arguments of :mod:`pfl_theory.cgpfl`.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import sympy as sp

from verification.transcriptions.compiled import Compiled

_P = {"positive": True}
alpha, alpha_hat, rho_omega, rho_g = sp.symbols("alpha alpha_hat rho_omega rho_g", **_P)
lipschitz_g, inexactness, delta_gap = sp.symbols("lipschitz_g inexactness delta_gap", **_P)
k, n_clients, local_rounds, rounds = sp.symbols("k n_clients local_rounds rounds", **_P)
intra_diversity, lam, smoothness = sp.symbols("intra_diversity lam smoothness", **_P)
m, d, confidence, cost_value = sp.symbols("m d confidence cost_value", **_P)
discrepancy, mu = sp.symbols("discrepancy mu", nonnegative=True)

# Theorem 4.1: α̂₀ and the bound on E[(1/K)‖∇G_K(Ω^{t*})‖²].
ALPHA_HAT0_ENTRIES = (8 * alpha ** 2 * rho_omega ** 2 / (k * delta_gap),
                      sp.sqrt(sp.Rational(4, 3)) * alpha * rho_omega / rho_g,
                      sp.sqrt(1 / (416 * lipschitz_g ** 2)) * alpha)
ALPHA_HAT0 = sp.Min(*ALPHA_HAT0_ENTRIES)
_RHO_PER_K = rho_omega ** 2 / k
THEOREM41 = {
    "optimization_term": 48 * alpha ** 2 * _RHO_PER_K / (ALPHA_HAT0 ** 2 * rounds),
    "variance_term": (80 * sp.sqrt(26 * _RHO_PER_K * lipschitz_g ** 2 * inexactness ** 2)
                      / sp.sqrt(n_clients * k * local_rounds * rounds)),
    "inexactness_floor": 52 * inexactness ** 2 / (k * n_clients),
}
THEOREM41["generalized"] = sp.Add(*THEOREM41.values())
THEOREM41["personalized"] = (THEOREM41["generalized"] + intra_diversity ** 2 / lam ** 2
                             + inexactness ** 2)
BETA_MAX = 1 / (2 * sp.sqrt(local_rounds * (local_rounds + 1)) * lipschitz_g)

# ICLR appendix A.3: the bound before the step-size case analysis.
C1 = 32 * rho_omega ** 2 / k
C2 = 24 * rho_g ** 2 / k
C3 = 832 * inexactness ** 2 * lipschitz_g ** 2 / (k * n_clients * local_rounds)
STEPWISE = (4 * delta_gap / (alpha_hat * rounds) + C1 * alpha ** 2 / (alpha_hat ** 2 * rounds)
            + C2 / rounds + C3 * alpha_hat ** 2 / alpha ** 2
            + 52 * inexactness ** 2 / (k * n_clients))

# Theorem 4.2 and e(K).
COMPLEXITY = sp.sqrt(d * k / m * sp.log(sp.E * m / d))
THEOREM42 = {
    "confidence_term": 2 * sp.sqrt(sp.log(n_clients / confidence) / m),
    "complexity_term": COMPLEXITY,
    "personalization_term": (lam + smoothness / 2) * cost_value,
    "discrepancy_term": discrepancy,
}
THEOREM42["total"] = sp.Add(*THEOREM42.values())
E_OF_K = COMPLEXITY + mu * cost_value

EXPRESSIONS: dict[str, sp.Expr] = {
    **{f"alpha_hat0.{i}": e for i, e in enumerate(ALPHA_HAT0_ENTRIES)},
    "alpha_hat0": ALPHA_HAT0, "beta_max": BETA_MAX, "theorem41_stepwise": STEPWISE,
    **{f"theorem41.{n}": e for n, e in THEOREM41.items()},
    **{f"theorem42.{n}": e for n, e in THEOREM42.items()},
    "complexity_term": COMPLEXITY, "e_of_k": E_OF_K,
}


_FORMULAS = Compiled(EXPRESSIONS)
#: formula ``name`` of :data:`EXPRESSIONS` in float64 (broadcast), and its argument names
evaluate, arguments = _FORMULAS.evaluate, _FORMULAS.arguments


# ----------------------------------------------------------------- finite sums, by loops
def weighted_sum(sizes: Any, complexity: Any, disc: Any, b: float) -> float:
    """Σ_i (m_i/m)(2B λ_H(D_i) + disc(D_i, D̃_i)), Theorem 4.2's last term, in exact rational
    arithmetic (sympy Rationals of the float64 inputs), rounded once."""
    q = [sp.Rational(float(x)) for x in sizes]
    total = sum(q, sp.Integer(0))
    terms = (qi / total * (2 * sp.Rational(float(b)) * sp.Rational(float(c))
                           + sp.Rational(float(g)))
             for qi, c, g in zip(q, complexity, disc))
    return float(sum(terms, sp.Integer(0)))


def sample_weighted_cost(theta: Any, omega: Any, sizes: Any = None) -> float:
    """cost(Θ, Ω; K) = Σ_i (m_i/m) min_k ‖θ_i − ω_k‖² (§A.8); equal sizes by default."""
    theta, omega = np.asarray(theta, float), np.asarray(omega, float)
    sizes = np.ones(len(theta)) if sizes is None else np.asarray(sizes, float)
    total = 0.0
    for th, mi in zip(theta, sizes):
        total += mi / sizes.sum() * min(float((th - om) @ (th - om)) for om in omega)
    return total


def lower_level(theta: Any, omega: Any, labels: Any) -> float:
    """Σ_k q_k Σ_{j∈C_k} p_{k,j} ‖θ_j − ω_k‖² with p_{k,j} = 1/|C_k|, q_k = |C_k|/N (eq. 2)."""
    theta, omega, labels = np.asarray(theta, float), np.asarray(omega, float), list(labels)
    total = 0.0
    for c in range(len(omega)):
        members = [j for j, lab in enumerate(labels) if lab == c]
        if not members:
            continue
        q, p = len(members) / len(labels), 1.0 / len(members)
        total += q * sum(p * float((theta[j] - omega[c]) @ (theta[j] - omega[c]))
                         for j in members)
    return total


def means_of_clusters(theta: Any, labels: Any, n_clusters: int) -> np.ndarray:
    """ω_k = (1/|C_k|) Σ_{j∈C_k} θ_j, one row per cluster (the lower level's minimiser)."""
    theta = np.asarray(theta, float)
    return np.array([np.mean([theta[j] for j, lab in enumerate(labels) if lab == c], axis=0)
                     for c in range(n_clusters)])


_W, _TH, _N = sp.symbols("omega theta N", real=True)
#: ∂/∂ω̃_i of G = (1/N) Σ_j ‖θ_j − ω̃_j‖²: only client i's term depends on its copy
_GRADIENT = sp.lambdify((_W, _TH, _N), sp.diff((_TH - _W) ** 2 / _N, _W), "numpy")


def copy_gradient(omega_copy: Any, theta: Any, n: int) -> np.ndarray:
    """∇_{ω̃_i}G, coordinate by coordinate, from the sympy derivative of G."""
    return np.asarray(_GRADIENT(np.asarray(omega_copy, float), np.asarray(theta, float),
                                float(n)), dtype=np.float64)


def set_partitions(n: int, blocks: int):
    """Every partition of range(n) into exactly ``blocks`` non-empty blocks, as label lists
    (canonical: labels appear in order of first use)."""
    for labels in itertools.product(range(blocks), repeat=n):
        seen = []
        for lab in labels:
            if lab not in seen:
                seen.append(lab)
        if seen == list(range(blocks)):
            yield labels


def exact_costs(models: Any, sizes: Any, k_max: int) -> np.ndarray:
    """min over all partitions into K blocks of the sample-weighted cost (centroids =
    weighted means), for K = 1 … k_max: the cost(Θ*, Ω*; K) of e(K), by brute force."""
    x, w = np.asarray(models, float), np.asarray(sizes, float)
    out = []
    for kk in range(1, k_max + 1):
        best = np.inf
        for labels in set_partitions(len(x), kk):
            lab = np.asarray(labels)
            cents = np.array([(w[lab == c, None] * x[lab == c]).sum(0) / w[lab == c].sum()
                              for c in range(kk)])
            best = min(best, float((w * ((x - cents[lab]) ** 2).sum(1)).sum() / w.sum()))
        out.append(best)
    return np.array(out)
