"""CGPFL theory: lower-level objective, cost, Theorems 4.1 and 4.2, e(K) and ``select_k``.

Paper: Tang, Guo, Guo, *Personalized Federated Learning with Contextualized Generalization*,
IJCAI 2022 (arXiv 2106.13044); earlier ICLR-2022 submission *… with Clustered
Generalization* (theorems numbered 1, 2 there).  Spec: docs/formulas.md §A (provenance tags and
errata there).  Row-major convention: Θ is passed as ``theta`` [N, d] (row i = θ_i, the
paper's column i), Ω as ``omega`` [K, d].  The clustering matrices P, J, Q live in
:mod:`pfl_theory.cgpfl_matrices` (re-exported here); the sympy forms of Theorem 4.1 in
:mod:`pfl_theory.cgpfl_symbolic`.

Erratum readings chosen (docs/formulas.md §A.11):
* ĥ*_i uses (λ/2)‖θ_i − ω*_k‖² (the proof's reading, ICLR eq. 25), hence the factor
  (λ + L/2) in front of the cost in Theorem 4.2.
* Δ_G is used *as printed*: E[(1/K)Σ_k G_k(ω⁰_k) − (1/K)Σ_k G_k(ω^T_k)] (final iterate, not
  an optimum).  If Δ_G ≤ 0 the first entry of α̂₀ does not bind and is set to +∞.
* Theorem 4.2 terms are returned in the IJCAI order (confidence, complexity,
  personalization, discrepancy); the ICLR version swaps the last two — only in the ICLR
  order is the remark "the first and third terms do not depend on K" true.
* Assumption 3 uses squares ρ_Ω², ρ_g² (IJCAI print).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from pfl_theory.cgpfl_matrices import (assignment_matrix, global_aggregation,  # noqa: F401
                                       indicator_matrix, transition_matrix, zero_cross_term)
from pfl_theory.kmeans import KMeansResult
from pfl_theory.validation import (finite_array, in_open_unit, in_range, nonnegative, positive,
                                   positive_int)
from pfl_theory.validation import guard_public_functions

ICLR_ORDER = ("confidence_term", "complexity_term", "discrepancy_term", "personalization_term")
IJCAI_ORDER = ("confidence_term", "complexity_term", "personalization_term", "discrepancy_term")


# ----------------------------------------------------------------------------- objectives
def _theta_omega(theta: Any, omega: Any) -> tuple[np.ndarray, np.ndarray]:
    th = finite_array("theta", theta, ndim=2)
    om = finite_array("omega", omega, ndim=2)
    if th.shape[1] != om.shape[1]:
        raise ValueError(f"theta [N, d] and omega [K, d] must share d, got {th.shape}, {om.shape}")
    if om.shape[0] > th.shape[0]:
        raise ValueError(f"K must be <= N = {th.shape[0]}, got K={om.shape[0]}")
    return th, om


def _sample_weights(client_sizes: Any, n: int) -> np.ndarray:
    """m_i/m for the given per-client sample counts (uniform 1/N if None)."""
    if client_sizes is None:
        return np.full(n, 1.0 / n)
    s = finite_array("client_sizes", client_sizes, ndim=1)
    if s.shape != (n,) or np.any(s <= 0):
        raise ValueError(f"client_sizes must be {n} positive numbers, got shape {s.shape}")
    return s / s.sum()


def cost(theta: Any, omega: Any, *, client_sizes: Any = None) -> float:
    """cost(Θ, Ω; K) = Σ_i (m_i/m) min_{k∈[K]} ‖θ_i − ω_k‖²   (CGPFL IJCAI, Thm 4.2 / §A.8).

    ``theta`` [N, d] = Θ*, ``omega`` [K, d] = Ω*, ``client_sizes`` [N] = m_i (m = Σ m_i;
    default equal sizes, i.e. weights 1/N).  K ≤ N required.
    """
    th, om = _theta_omega(theta, omega)
    w = _sample_weights(client_sizes, th.shape[0])
    d2 = ((th[:, None, :] - om[None, :, :]) ** 2).sum(-1)
    return float(w @ d2.min(1))


def lower_level_objective(theta: Any, omega: Any, labels: Any) -> float:
    """Lower level of eq. (2): Σ_k q_k Σ_{j∈C_k} p_{k,j} ‖θ_j − ω_k‖², p_{k,j} = 1/|C_k|,
    q_k = |C_k|/N  (§A.2).  [DERIVED] equals (1/N) Σ_j ‖θ_j − ω_{k(j)}‖² (k-means / N).

    ``labels[j]`` = k(j) ∈ [0, K); an empty cluster has q_k = 0 and contributes nothing.
    """
    th, om = _theta_omega(theta, omega)
    lab = np.asarray(labels)
    if lab.shape != (th.shape[0],) or not np.issubdtype(lab.dtype, np.integer) \
            or lab.min() < 0 or lab.max() >= om.shape[0]:
        raise ValueError(f"labels must be {th.shape[0]} integers in [0, {om.shape[0]})")
    n = th.shape[0]
    total = 0.0
    for k in range(om.shape[0]):
        members = np.flatnonzero(lab == k)
        if members.size == 0:
            continue
        q_k, p_kj = members.size / n, 1.0 / members.size
        total += q_k * sum(p_kj * float(((th[j] - om[k]) ** 2).sum()) for j in members)
    return total


def cluster_means(theta: Any, labels: Any, k: int) -> np.ndarray:
    """Minimiser of the lower level over Ω for a fixed partition (§A.2 [DERIVED]):
    ω_k = (1/|C_k|) Σ_{j∈C_k} θ_j.  Every cluster must be non-empty."""
    th = finite_array("theta", theta, ndim=2)
    p = assignment_matrix(np.asarray(labels), k)
    return p.T @ th


def local_model_gradient(omega_copy: Any, theta: Any, *, n_clients: int) -> Any:
    """∇_{ω_i} G = (2/N)(ω̃_i − θ̃_i)  (Algorithm 1 local step, §A.5; ICLR appendix) for
    G = (1/N) Σ_j ‖θ_j − ω_{k(j)}‖² differentiated w.r.t. client i's copy.  numpy/torch."""
    n = positive_int("n_clients", n_clients)
    if tuple(omega_copy.shape) != tuple(theta.shape):
        raise ValueError(f"omega_copy and theta must have the same shape, got "
                         f"{tuple(omega_copy.shape)} and {tuple(theta.shape)}")
    return (2.0 / n) * (omega_copy - theta)


# ------------------------------------------------------------------------ Theorem 4.2
def complexity_term(k: Any, *, m: float, d: int) -> np.ndarray:
    """√((dK/m) log(em/d)) — second term of Theorem 4.2 and of e(K) (eq. 11); vectorised in K.

    ``m`` total samples, ``d`` model dimension.  Needs log(em/d) > 0, i.e. m > d/e.
    """
    m = positive("m", m)
    d = positive_int("d", d)
    if math.log(math.e * m / d) <= 0:
        raise ValueError(f"log(e*m/d) must be > 0 (m > d/e = {d / math.e:.4g}); got m={m}, d={d}")
    ks = np.asarray(k, dtype=np.float64)
    if np.any(ks < 1) or np.any(ks != np.round(ks)):
        raise ValueError(f"K must be integers >= 1, got {k!r}")
    return np.sqrt(d * ks / m * math.log(math.e * m / d))


@dataclass(frozen=True)
class Theorem42Bound:
    """Right-hand side of Theorem 4.2 (IJCAI order of terms; see ``ICLR_ORDER``)."""

    confidence_term: float       # 2 √(log(N/δ)/m)
    complexity_term: float       # √((dK/m) log(em/d))
    personalization_term: float  # (λ + L/2) cost(Θ*, Ω*; K)
    discrepancy_term: float      # Σ_i (m_i/m)(2B λ_H(D_i) + disc(D_i, D̃_i))
    total: float


def theorem42_bound(*, m: float, n_clients: int, d: int, k: int, confidence: float, lam: float,
                    smoothness: float, cost_value: float, discrepancy: float = 0.0) -> Theorem42Bound:
    """Theorem 4.2 of CGPFL (IJCAI; Theorem 2 of the ICLR version), w.p. ≥ 1 − δ:

        Σ_i (m_i/m){L_{D_i}(ĥ*_i) − min_h L_{D_i}(h)} ≤ 2√(log(N/δ)/m) + √((dK/m) log(em/d))
            + (λ + L/2) cost(Θ*, Ω*; K) + Σ_i (m_i/m)(2B λ_H(D_i) + disc(D_i, D̃_i)).

    Symbols: m = ``m`` (total samples), N = ``n_clients``, d = ``d``, K = ``k`` (≤ N),
    δ = ``confidence`` ∈ (0,1), λ = ``lam``, L = ``smoothness`` (Assumption 1), cost =
    ``cost_value`` (see :func:`cost`), last term = ``discrepancy`` (not computable from
    samples in general; see :func:`weighted_discrepancy`; default 0 = omitted).
    Reading: ĥ* with λ/2 (§A.11), giving the factor (λ + L/2).
    """
    n = positive_int("n_clients", n_clients)
    k = positive_int("k", k)
    if k > n:
        raise ValueError(f"K must be <= N = {n}, got K={k}")
    conf = in_open_unit("confidence", confidence)
    lam, L = nonnegative("lam", lam), nonnegative("smoothness", smoothness)
    c, disc = nonnegative("cost_value", cost_value), nonnegative("discrepancy", discrepancy)
    t2 = float(complexity_term(k, m=m, d=d))
    t1 = 2.0 * math.sqrt(math.log(n / conf) / float(m))
    t3 = (lam + L / 2.0) * c
    return Theorem42Bound(t1, t2, t3, disc, t1 + t2 + t3 + disc)


def weighted_discrepancy(client_sizes: Any, complexity: Any, disc: Any, *, b: float) -> float:
    """Σ_i (m_i/m)(2B λ_H(D_i) + disc(D_i, D̃_i)) — last term of Theorem 4.2 (Defs 2–3).

    ``complexity`` [N] = λ_H(D_i) (eq. 9), ``disc`` [N] = label-discrepancies (eq. 10), b = B.
    """
    b = nonnegative("b", b)
    lam_h = finite_array("complexity", complexity, ndim=1)
    dis = finite_array("disc", disc, ndim=1)
    w = _sample_weights(client_sizes, lam_h.size)
    if dis.shape != lam_h.shape or np.any(lam_h < 0) or np.any(dis < 0):
        raise ValueError("complexity and disc must be non-negative arrays of length N")
    return float(w @ (2.0 * b * lam_h + dis))


# ------------------------------------------------------------------------ Theorem 4.1
@dataclass(frozen=True)
class Theorem41Bound:
    """Theorem 4.1 (hidden O-constants = 1 beyond the printed 48, 80√26, 52)."""

    alpha_hat0_entries: tuple[float, float, float]
    alpha_hat0: float
    optimization_term: float   # 48 α² (ρ_Ω²/K) / (α̂₀² T)
    variance_term: float       # 80 √(26 (ρ_Ω²/K) L_G² δ²) / √(NKRT)
    inexactness_floor: float   # 52 δ² / (KN)
    generalized: float         # (a): bound on E[(1/K)‖∇G_K(Ω^{t*})‖²]
    personalized: float | None  # (b): generalized + δ_G²/λ² + δ² (if δ_G and λ given)


def alpha_hat0(*, alpha: float, rho_omega: float, rho_g: float, lipschitz_g: float, k: int,
               delta_gap: float) -> tuple[float, ...]:
    """Entries of α̂₀ (Theorem 4.1, §A.7): (8α²ρ_Ω²/(KΔ_G), √(4/3) αρ_Ω/ρ_g, α/√(416 L_G²)).
    Δ_G as printed (final iterate); Δ_G ≤ 0 ⇒ first entry +∞ (does not bind)."""
    a = in_range("alpha", alpha, 0.0, 1.0, closed=True)
    if a == 0:
        raise ValueError("alpha must be in (0, 1]")
    ro, rg = positive("rho_omega", rho_omega), positive("rho_g", rho_g)
    lg, k = positive("lipschitz_g", lipschitz_g), positive_int("k", k)
    dg = float(delta_gap)
    if not math.isfinite(dg):
        raise ValueError(f"delta_gap must be finite, got {delta_gap!r}")
    e1 = 8 * a**2 * ro**2 / (k * dg) if dg > 0 else math.inf
    return (e1, math.sqrt(4.0 / 3.0) * a * ro / rg, a / math.sqrt(416.0 * lg**2))


def theorem41_bound(*, alpha: float, rho_omega: float, rho_g: float, lipschitz_g: float,
                    inexactness: float, k: int, n_clients: int, local_rounds: int, rounds: int,
                    delta_gap: float, intra_diversity: float | None = None,
                    lam: float | None = None) -> Theorem41Bound:
    """Theorem 4.1 of CGPFL (IJCAI; Theorem 1 of the ICLR version), §A.7:

      (a) E[(1/K)‖∇G_K(Ω^{t*})‖²] ≤ O( 48α²(ρ_Ω²/K)/(α̂₀²T) + 80√(26(ρ_Ω²/K)L_G²δ²)/√(NKRT)
                                        + 52δ²/(KN) ),
      (b) (1/N) Σ_i E‖θ̃_i^{t*} − ω_{k(i)}^{t*}‖² ≤ O((a)) + O(δ_G²/λ² + δ²).

    Symbols: α = ``alpha`` ∈ (0,1], ρ_Ω, ρ_g (Assumption 3, squared norms bounded by ρ²),
    L_G = ``lipschitz_g``, δ = ``inexactness`` (Proposition 1: δ-approximate personalized
    solutions), K = ``k`` ≤ N = ``n_clients``, R = ``local_rounds``, T = ``rounds``,
    Δ_G = ``delta_gap`` (as printed, §A.11), δ_G = ``intra_diversity`` (Assumption 2),
    λ = ``lam``.  Conditions (not checked here; see :func:`beta_max`): β ≤ 1/(2√(R(R+1))L_G).
    Hidden constants of O(·) are 1.  The rate O(1/√(KNRT)) reads off the second term with
    ρ_Ω²/K (per-context norm) held fixed (:mod:`pfl_theory.cgpfl_symbolic`).
    """
    n, k = positive_int("n_clients", n_clients), positive_int("k", k)
    if k > n:
        raise ValueError(f"K must be <= N = {n}, got K={k}")
    r, t = positive_int("local_rounds", local_rounds), positive_int("rounds", rounds)
    dl = nonnegative("inexactness", inexactness)
    entries = alpha_hat0(alpha=alpha, rho_omega=rho_omega, rho_g=rho_g,
                         lipschitz_g=lipschitz_g, k=k, delta_gap=delta_gap)
    a0 = min(entries)
    rk = float(rho_omega) ** 2 / k
    opt = 48.0 * float(alpha) ** 2 * rk / (a0**2 * t)
    var = 80.0 * math.sqrt(26.0 * rk * float(lipschitz_g) ** 2 * dl**2) / math.sqrt(n * k * r * t)
    floor = 52.0 * dl**2 / (k * n)
    gen = opt + var + floor
    pers = None
    if intra_diversity is not None or lam is not None:
        if intra_diversity is None or lam is None:
            raise ValueError("part (b) needs both intra_diversity (δ_G) and lam (λ)")
        dgi, lm = nonnegative("intra_diversity", intra_diversity), positive("lam", lam)
        pers = gen + dgi**2 / lm**2 + dl**2
    return Theorem41Bound(entries, a0, opt, var, floor, gen, pers)


def theorem41_stepwise(*, alpha_hat: float, alpha: float, rho_omega: float | None,
                       rho_g: float | None, lipschitz_g: float, inexactness: float, k: int,
                       n_clients: int, local_rounds: int, rounds: int, delta_gap: float,
                       fixed_assignment: bool = False) -> float:
    """Bound before the step-size case analysis (ICLR appendix A.3, §A.7):

      4Δ_G/(α̂T) + C₁α²/(α̂²T) + C₂/T + C₃α̂²/α² + 52δ²/(KN),
      C₁ = 32ρ_Ω²/K, C₂ = 24ρ_g²/K, C₃ = 832δ²L_G²/(KNR),  α̂ = Rαβ = ``alpha_hat``.

    A direct case analysis with α̂ = min(α̂₀, α(C₁/(C₃T))^{1/4}) gives
    ≤ 3C₁α²/(α̂₀²T) + 4√(C₁C₃/T) + 52δ²/(KN); the paper prints 3/2 and 5/2 (same O-rate).

    ``fixed_assignment=True``: Q^t = I every round, so B₁ = ‖Ω^t(I − Q^t)‖² and
    B₂ = ‖∇G_K(Ω^t)(I − Q^t)‖² of the one-round inequality are 0 and the C₁, C₂ terms (their
    bounds through Assumption 3) drop: 4Δ_G/(α̂T) + C₃α̂²/α² + 52δ²/(KN); ρ_Ω, ρ_g unused.
    """
    ah = positive("alpha_hat", alpha_hat)
    a, t = positive("alpha", alpha), positive_int("rounds", rounds)
    k, n, r = positive_int("k", k), positive_int("n_clients", n_clients), positive_int("local_rounds", local_rounds)
    if fixed_assignment:
        c1 = c2 = 0.0
    else:
        c1 = 32 * positive("rho_omega", rho_omega) ** 2 / k
        c2 = 24 * positive("rho_g", rho_g) ** 2 / k
    dl = nonnegative("inexactness", inexactness)
    c3 = 832 * dl**2 * positive("lipschitz_g", lipschitz_g) ** 2 / (k * n * r)
    return (4 * float(delta_gap) / (ah * t) + c1 * a**2 / (ah**2 * t) + c2 / t
            + c3 * ah**2 / a**2 + 52 * dl**2 / (k * n))


def beta_max(*, local_rounds: int, lipschitz_g: float) -> float:
    """Step-size condition of Theorem 4.1: β ≤ 1/(2√(R(R+1)) L_G)."""
    r = positive_int("local_rounds", local_rounds)
    return 1.0 / (2.0 * math.sqrt(r * (r + 1)) * positive("lipschitz_g", lipschitz_g))


# ------------------------------------------------------------------- e(K) and select_k
RELATIVE_MU = "relative"
WIDEST_BAND_MU = "widest-band"


def e_of_k(ks: Any, costs: Any, *, mu: float, m: float, d: int) -> np.ndarray:
    """e(K) = √((dK/m) log(em/d)) + μ · cost(Θ*, Ω*; K)  (IJCAI eq. 11 / ICLR eq. 12).

    Vectorised: ``ks`` and ``costs`` are equal-length arrays; μ ≥ 0 stands in for λ + L/2.
    """
    mu = nonnegative("mu", mu)
    c = finite_array("costs", costs, ndim=1)
    if c.size == 0:
        raise ValueError("e_of_k needs at least one K (ks and costs are empty)")
    if np.any(c < 0) or c.shape != np.shape(ks):
        raise ValueError("costs must be non-negative and have the same length as ks")
    return complexity_term(ks, m=m, d=d) + mu * c


@dataclass(frozen=True)
class SelectKResult:
    k_hat: int
    ks: np.ndarray                 # K = 1 … k_max
    e_values: np.ndarray           # e(K)
    costs: np.ndarray              # cost(Θ, Ω_K; K) with sample weights m_i/m (inf if it overflows)
    complexity_terms: np.ndarray   # √((dK/m) log(em/d))
    clusterings: tuple[KMeansResult, ...]  # the clustering used for each K
    relative_costs: np.ndarray = None  # cost(K)/cost(1) (scale-free; 1 at K = 1)
    mu: float = 0.0                # μ used, in the models' own units (inf if it overflows)
    mu_rule: str = ""              # "relative" (μ = 1/cost(1)) or "given"
    scale: float = 0.0             # √cost(1): RMS spread of the models around their mean
    path: Any = None               # the ClusterPath (pfl_theory.cgpfl_selection) it came from
    bands: tuple = ()              # MuBand per K that some μ chooses (w = μ·cost(1))
    relative_cap: int = 0          # largest K the relative μ can choose (c(√K − 1) < 1)

    def band_lines(self) -> list[str]:
        """One line per K that some μ chooses: the band of μ (models' units and relative)."""
        with np.errstate(over="ignore"):
            s2 = np.float64(self.scale) ** 2
        out = []
        for b in self.bands:
            lo, hi = (b.lo / s2, b.hi / s2) if s2 > 0 else (b.lo, b.hi)
            mark = "  (K_hat)" if b.k == self.k_hat else ""
            out.append(f"K={b.k:<3d} mu in [{lo:.4g}, {hi:.4g})  (mu*cost(1) in [{b.lo:.4g}, "
                       f"{b.hi:.4g}), {b.decades:.2f} decades){mark}")
        return out

    def cap_line(self) -> str:
        """The one-line note when the relative μ cannot reach K_max, else ''."""
        if self.mu_rule != RELATIVE_MU or self.relative_cap >= int(self.ks[-1]):
            return ""
        return (f"relative mu caps K_hat <= {self.relative_cap} whatever the data "
                f"(K beats K=1 only if c(sqrt K - 1) < 1, c = {self.complexity_terms[0]:.4g})")


def select_k(client_models: Any, *, mu: float | str = RELATIVE_MU, m: Any, d: int | None = None,
             k_max: int | None = None, restarts: int = 30, seed: int = 0) -> SelectKResult:
    """CGPFL-Heur's choice of K (§A.9): K̂ = argmin_{1≤K≤k_max} e(K) (smallest K on ties).

    Args:
        client_models: [N, d_model] uploaded models (Θ or Ω_{I,R} rows).
        mu: μ ≥ 0 (stands in for λ + L/2, in the models' units), or ``"relative"`` (default):
            μ = 1/cost(1), i.e. e(K) = √((dK/m) log(em/d)) + cost(K)/cost(1) (K̂ is then
            capped: ``relative_cap``), or ``"widest-band"``: μ at the geometric centre of the
            widest bounded band of μ giving one K̂
            (:func:`pfl_theory.cgpfl_selection.widest_band`: the sharpest elbow of cost(K);
            relative μ when no band is bounded).
        m: total number of samples m (scalar: equal client sizes, weights 1/N) **or** the
            per-client sample counts m_i ([N]; then m = Σ m_i and weights m_i/m).
        d: dimension in the complexity term (default: number of columns of client_models).
        k_max: largest K searched (default N//2, at least 1 — the paper's "≤ N/2"); ≤ N.
        restarts, seed: k-means++ restarts per K and seed (seed + K is used for each K).

    **Default μ (scale-free reading).**  Theorem 4.2 measures the loss in [0, B = 1] (its
    complexity term carries B = 1) and the personalization term (λ + L/2)·cost has the units
    of the loss because L has units loss/‖θ‖².  From the models alone λ and L are unknown;
    ``"relative"`` takes the μ at which one context (K = 1) costs the whole loss range,
    μ·cost(1) = B = 1.  It is invariant to rescaling the models (θ → cθ leaves K̂ unchanged,
    as μ = λ + L/2 with L measured in the rescaled units would).  Measured against the
    empirically best K in :mod:`verification.selection.k_benchmark`.

    The clustering is :func:`pfl_theory.cgpfl_selection.cluster_path` (normalised units; best
    of ``restarts`` k-means++ seedings and a warm start from K−1, so the cost is
    non-increasing in K).  Weighted k-means (weights m_i) minimises exactly the
    sample-weighted cost in e(K); with equal sizes it is the CGPFL lower level.
    """
    from pfl_theory.cgpfl_selection import cluster_path, mu_bands, relative_cap, widest_band

    x = finite_array("client_models", client_models, ndim=2)
    n = x.shape[0]
    sizes = np.asarray(m, dtype=np.float64)
    if sizes.ndim == 0:
        total, weights = positive("m", m), None
    else:
        _sample_weights(sizes, n)  # validates
        total, weights = float(sizes.sum()), sizes
    d = x.shape[1] if d is None else positive_int("d", d)
    k_max = max(1, n // 2) if k_max is None else positive_int("k_max", k_max)
    if k_max > n:
        raise ValueError(f"k_max must be <= N = {n}, got {k_max}")
    if isinstance(mu, str):
        if mu not in (RELATIVE_MU, WIDEST_BAND_MU):
            raise ValueError(f"mu must be a number >= 0, {RELATIVE_MU!r} or {WIDEST_BAND_MU!r}, "
                             f"got {mu!r}")
    else:
        mu = nonnegative("mu", mu)
    complexity_term(1, m=total, d=d)  # validates m > d/e before the clustering work
    path = cluster_path(x, weights=weights, k_max=k_max, restarts=restarts, seed=seed)
    ks, rel = path.ks, path.relative_costs
    comp = complexity_term(ks, m=total, d=d)
    with np.errstate(over="ignore"):
        scale2 = np.float64(path.scale) ** 2
        costs = rel * scale2
    bands = mu_bands(comp, rel)
    widest = widest_band(bands) if mu == WIDEST_BAND_MU and scale2 > 0 else None
    if widest is not None:
        weight, rule = float(np.sqrt(widest.lo * widest.hi)), WIDEST_BAND_MU
        mu_units = weight / scale2
    elif isinstance(mu, str):
        weight, rule = (1.0 if scale2 > 0 else 0.0), RELATIVE_MU
        mu_units = 1.0 / scale2 if scale2 > 0 else 0.0
    else:
        with np.errstate(over="ignore"):
            weight = mu * scale2
        if not math.isfinite(weight):
            raise ValueError(f"mu * cost(1) overflows (mu={mu}, RMS model spread "
                             f"{path.scale:.3g}); use mu='relative' or rescale the models")
        rule, mu_units = "given", mu
    e = comp + weight * rel
    return SelectKResult(int(ks[np.argmin(e)]), ks, e, costs, comp, path.clusterings, rel,
                         float(mu_units), rule, float(path.scale), path, bands,
                         relative_cap(comp[0], int(ks[-1])))


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
