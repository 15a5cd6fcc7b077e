"""PLGU generalization bounds: Lemmas 2–4 and Theorems 1–3, plus a Rademacher sanity tool.

Paper: Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated
Learning?* (CVPR 2023) — "PLGU"; appendix A (Thm 1, Lemmas 1–4), B (Thm 2, Lemmas 5–7),
C.2 (Thm 3, Lemmas 8–10).  Spec: docs/formulas.md §D.8; checks §E.D7–D8.

Common symbols → arguments: β = ``beta`` (Lipschitz constant of the loss), B = ``B`` (bound
on ‖x‖_2, also used for ‖x‖ in the explicit displays), ρ = ``rho`` (perturbation radius),
M_l = ``spectral_bounds[l-1]`` (spectral-norm bound of layer l, l = 1..L), d = ``d``
(width), d_l = ``widths[l]`` (l = 0..L, d_0 = input dimension), m = ``m`` (total samples),
m̂ = ``m_hat`` (= min_i m_i), N = ``N`` (clients), γ = ``gamma`` (confidence, in (0, 1)),
L_Per = ``personalized_layers`` (0-based layer indices, D = their number), p = ``p``
(ℓ_p perturbation, q its dual).

The theorems are O(·) statements; the functions return the expressions inside O(·) with
constant 1, as named terms plus their combination (``total``).  Lemmas 2–4 return the
explicit displays.  Scalar arguments broadcast as numpy arrays (so a whole grid of ρ, m, N,
m̂ is one call); layer lists are plain sequences.

Readings and edge cases (recorded decisions):
* log of a layer count: ``log D``, ``log(L−D)``, ``log L``, ``log(L−1)``, ``log L_h`` and the
  explicit ``log 3D``, ``log 3(L−D)`` are all evaluated as ``log max(x, 2)`` (§E.D7).  They
  are undefined or non-positive at counts ≤ 1; the clip keeps every term finite and ≥ 0.
  Consequently Theorem 1's term 4 and Lemma 4's adversarial term vanish at D ∈ {0, L} only
  through the D(L−D) factor, and are positive for 1 ≤ D ≤ L−1 (also at D = 1, L−D = 1).
* max{1, q^{1/2−1/p}} uses the dual exponent q (printed "p+q=1" is a typo for 1/p+1/q=1).
* Lemma 2's "d+1+log n": d as printed (width; the proof's first line has L), n = input
  dimension (the number R of coordinates in the proof).
* Lemma 4 is implemented as displayed (‖x‖ on the universal block, ‖x‖+ρ on the personalized
  block — swapped w.r.t. its own O-form; docs/formulas.md §D.8).  Theorem 1's term 4 follows the
  O-form (B on L_Per, B+ρ on L_Uni), with Π_{l∈Per} B M_l = B^D Π_{Per} M_l literally.
* Theorem 1's last term is 2√(log(1/γ)/m) (appendix; the main text's √(m log(1/γ)) is a typo).
* Theorem 2 follows the appendix (complete) version; its leaked symbols L_h, M^h_l are read as
  the representation depth L−1 = len(spectral_bounds) and its bounds M_l (consistent with
  Lemma 7's explicit first term).  All representation terms scale with N√m̂ (appendix).
* Theorem 3 is implemented as printed: β multiplies only the descriptor term,
  total = β β_v T_v + β_h (T_hn + T̃_hn) + 2√(log(1/γ)/N).  (Lemma 8 puts β in front of
  both; the two agree when β = 1.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from pfl_theory.validation import finite_array, positive_int
from pfl_theory.validation import guard_public_functions


@dataclass(frozen=True)
class BoundTerms:
    """Named terms of a bound and their combination (floats, or arrays for grid inputs)."""

    terms: dict[str, Any]
    total: Any


# ----------------------------------------------------------------------------- helpers
def _arr(name: str, value: Any, *, strict: bool = True) -> np.ndarray:
    a = finite_array(name, value)
    if strict and np.any(a <= 0):
        raise ValueError(f"{name} must be > 0, got {value!r}")
    if not strict and np.any(a < 0):
        raise ValueError(f"{name} must be >= 0, got {value!r}")
    return a


def _gamma(value: Any) -> np.ndarray:
    g = finite_array("gamma", value)
    if np.any((g <= 0) | (g >= 1)):
        raise ValueError(f"gamma must lie in (0, 1), got {value!r}")
    return g


def _bounds(spectral_bounds: Sequence[float], name: str = "spectral_bounds") -> np.ndarray:
    M = finite_array(name, spectral_bounds, ndim=1)
    if M.size == 0 or np.any(M <= 0):
        raise ValueError(f"{name} must be a non-empty list of positive numbers")
    return M


def _widths(widths: Sequence[int], L: int) -> np.ndarray:
    w = finite_array("widths", widths, ndim=1)
    if w.size != L + 1 or np.any(w < 1):
        raise ValueError(f"widths must list d_0..d_L (length {L + 1}) of values >= 1, got {widths!r}")
    return w


def _per_mask(personalized_layers: Sequence[int], L: int) -> np.ndarray:
    mask = np.zeros(L, dtype=bool)
    for l in personalized_layers:
        l = positive_int("personalized layer index", l, minimum=0)
        if l >= L or mask[l]:
            raise ValueError(f"personalized_layers must be distinct indices in [0, {L}), "
                             f"got {list(personalized_layers)!r}")
        mask[l] = True
    return mask


def clipped_log(x: Any) -> np.ndarray:
    """log max(x, 2): the edge-case reading of log D, log(L−D), log L (§E.D7)."""
    return np.log(np.maximum(np.asarray(x, dtype=np.float64), 2.0))


def lp_factor(p: float) -> float:
    """max{1, q^{1/2 − 1/p}} with 1/p + 1/q = 1, p in [1, ∞] (Lemma 3, from Xiao et al.)."""
    p = float(p)
    if math.isnan(p) or p < 1:
        raise ValueError(f"p must lie in [1, inf], got {p!r}")
    if p == 1:  # q = ∞, exponent −1/2: q^{−1/2} → 0
        return 1.0
    q = 1.0 if math.isinf(p) else p / (p - 1.0)
    return max(1.0, q ** (0.5 - 1.0 / p))


def _out(x: np.ndarray) -> Any:
    return float(x) if np.ndim(x) == 0 else x


def _pack(terms: dict[str, np.ndarray], total: np.ndarray) -> BoundTerms:
    """Broadcast every term to the total's shape (grid inputs) and unwrap 0-d arrays."""
    shape = np.shape(total)
    return BoundTerms({k: _out(np.broadcast_to(np.asarray(v, dtype=np.float64), shape).copy())
                       for k, v in terms.items()}, _out(np.asarray(total, dtype=np.float64)))


# ----------------------------------------------------------------------------- lemmas
def lemma2_margin_complexity(*, B: Any, spectral_bounds: Sequence[float], m: Any, d: float,
                             n: float) -> BoundTerms:
    """Lemma 2 (App. A):  R_U(G_u) ≤ 2 B √(d + 1 + log n) Π_{l=1}^L M_l / √m.

    Assumes ‖x‖_2 ≤ B, layer spectral norms ≤ M_l, activations σ_l(0) = 0 (Golowich-style).
    Lemma 6/9 are the same display with √m → N√m̂ (pass m = (N√m̂)²).  Term: ``margin``.
    """
    B, m = _arr("B", B), _arr("m", m)
    d, n = float(_arr("d", d)), float(_arr("n", n))
    M = _bounds(spectral_bounds)
    t = 2.0 * B * math.sqrt(d + 1.0 + math.log(n)) * np.prod(M) / np.sqrt(m)
    return _pack({"margin": t}, t)


def lemma3_adversarial_complexity(*, B: Any, rho: Any, spectral_bounds: Sequence[float],
                                  widths: Sequence[int], m: Any, gamma: Any,
                                  p: float = 2.0) -> BoundTerms:
    """Lemma 3 (App. A):  R_U(G̃_u) ≤ 24 max{1,q^{1/2−1/p}} (B+ρ)/(γ√m)
    · √(Σ_{l=1}^L d_l d_{l−1} · log 3L) · Π_l M_l.   Term: ``adversarial``.

    Assumes ‖x‖ ≤ B, ℓ_p perturbation of radius ρ, spectral bounds M_l, widths d_0..d_L.
    """
    B, rho, m, g = _arr("B", B), _arr("rho", rho, strict=False), _arr("m", m), _gamma(gamma)
    M = _bounds(spectral_bounds)
    L = M.size
    w = _widths(widths, L)
    s = float(np.sum(w[1:] * w[:-1]))
    t = (24.0 * lp_factor(p) * (B + rho) / (g * np.sqrt(m))
         * np.sqrt(s * np.log(3.0 * L)) * np.prod(M))
    return _pack({"adversarial": t}, t)


def lemma4_personalized_complexity(*, B: Any, rho: Any, spectral_bounds: Sequence[float],
                                   widths: Sequence[int], personalized_layers: Sequence[int],
                                   m_hat: Any, gamma: Any, d: float, n: float,
                                   p: float = 2.0) -> BoundTerms:
    """Lemma 4 (App. A), explicit display, D = |L_Per|:

        R_P(G_p) + R_P(G̃_p) ≤ 2B√(d+1+log n) Π_l M_l / √m̂
          + 24 √(D(L−D)) /(γ√m̂) · max{1,q^{1/2−1/p}} · B √(S_Uni · log 3D) Π_{Uni} M_l
            · (B+ρ) √(S_Per · log 3(L−D)) Π_{Per} M_l,      S_X = Σ_{l∈X} d_l d_{l−1}.

    logs clipped as log max(·, 2) (module docstring); the adversarial term is 0 at D ∈ {0, L}.
    Terms: ``margin``, ``adversarial``.
    """
    B, rho = _arr("B", B), _arr("rho", rho, strict=False)
    mh, g = _arr("m_hat", m_hat), _gamma(gamma)
    M = _bounds(spectral_bounds)
    L = M.size
    w = _widths(widths, L)
    per = _per_mask(personalized_layers, L)
    D = int(per.sum())
    prod_dd = w[1:] * w[:-1]
    s_uni, s_per = float(prod_dd[~per].sum()), float(prod_dd[per].sum())
    margin = lemma2_margin_complexity(B=B, spectral_bounds=M, m=mh, d=d, n=n).total
    adv = (24.0 * math.sqrt(D * (L - D)) / (g * np.sqrt(mh)) * lp_factor(p)
           * B * np.sqrt(s_uni * clipped_log(3 * D)) * np.prod(M[~per])
           * (B + rho) * np.sqrt(s_per * clipped_log(3 * (L - D))) * np.prod(M[per]))
    return _pack({"margin": margin, "adversarial": adv}, margin + adv)


# ----------------------------------------------------------------------------- theorems
def theorem1_plgu_lf(*, beta: Any, B: Any, rho: Any, spectral_bounds: Sequence[float], d: float,
                     personalized_layers: Sequence[int], m: Any, N: Any, m_hat: Any,
                     gamma: Any) -> BoundTerms:
    """Theorem 1 (PLGU-LF), w.p. ≥ 1−γ the generalization gap is O(total) with

        global_margin            = B √L Π_l M_l / (γ √m)
        global_adversarial       = (B+ρ) d √(L log L) Π_l M_l / (γ √m)
        personalized_margin      = B √L Π_l M_l / (γ N √m̂)
        personalized_adversarial = d D(L−D) √(log D) Π_{Per} B M_l · √(log(L−D)) Π_{Uni} (B+ρ) M_l
                                   / (γ N √m̂)
        concentration            = 2 √(log(1/γ)/m)
        total = β · (sum of the four complexity terms) + concentration.

    Increasing in ρ (adversarial terms only), decreasing in m, N, m̂.  logs clipped.
    """
    beta, B, rho = _arr("beta", beta), _arr("B", B), _arr("rho", rho, strict=False)
    m, N, mh, g = _arr("m", m), _arr("N", N), _arr("m_hat", m_hat), _gamma(gamma)
    d = float(_arr("d", d))
    M = _bounds(spectral_bounds)
    L = M.size
    per = _per_mask(personalized_layers, L)
    D = int(per.sum())
    PM = np.prod(M)
    terms = {
        "global_margin": B * math.sqrt(L) * PM / (g * np.sqrt(m)),
        "global_adversarial": (B + rho) * d * np.sqrt(L * clipped_log(L)) * PM / (g * np.sqrt(m)),
        "personalized_margin": B * math.sqrt(L) * PM / (g * N * np.sqrt(mh)),
        "personalized_adversarial": (
            d * D * (L - D) * np.sqrt(clipped_log(D)) * B ** D * np.prod(M[per])
            * np.sqrt(clipped_log(L - D)) * (B + rho) ** (L - D) * np.prod(M[~per])
            / (g * N * np.sqrt(mh))),
        "concentration": 2.0 * np.sqrt(np.log(1.0 / g) / m),
    }
    complexity = sum(v for k, v in terms.items() if k != "concentration")
    return _pack(terms, beta * complexity + terms["concentration"])


def theorem2_plgu_grep(*, beta: Any, beta_h: Any, beta_phi: Any, B: Any, rho: Any, M_h: Any,
                       spectral_bounds: Sequence[float], d: float, N: Any, m_hat: Any,
                       gamma: Any) -> BoundTerms:
    """Theorem 2 (PLGU-GRep), appendix B version; ``spectral_bounds`` = the L−1 representation
    layers L^φ (so L − 1 = len(spectral_bounds)), M_h = head bound:

        head                       = B M_h / (γ N √m̂)                     (Lemma 6)
        representation_margin      = B √(L−1) Π_{φ} M_l / (γ N √m̂)          (Lemma 7; L_h := L−1)
        representation_adversarial = (B+ρ) d √((L−1) log(L−1)) Π_{φ} M_l / (γ N √m̂)
        concentration              = 2 √(log(1/γ)/N)                       (Lemma 5)
        total = β (β_h head + β_φ (margin + adversarial)) + concentration.

    Independent of m; decreasing in N and m̂; increasing in ρ.  log(L−1) clipped.
    """
    beta, bh, bp = _arr("beta", beta), _arr("beta_h", beta_h), _arr("beta_phi", beta_phi)
    B, rho, Mh = _arr("B", B), _arr("rho", rho, strict=False), _arr("M_h", M_h)
    N, mh, g = _arr("N", N), _arr("m_hat", m_hat), _gamma(gamma)
    d = float(_arr("d", d))
    M = _bounds(spectral_bounds)
    Lphi, PM = M.size, np.prod(M)
    denom = g * N * np.sqrt(mh)
    terms = {
        "head": B * Mh / denom,
        "representation_margin": B * math.sqrt(Lphi) * PM / denom,
        "representation_adversarial": (B + rho) * d * np.sqrt(Lphi * clipped_log(Lphi)) * PM / denom,
        "concentration": 2.0 * np.sqrt(np.log(1.0 / g) / N),
    }
    total = (beta * (bh * terms["head"] + bp * (terms["representation_margin"]
                                                + terms["representation_adversarial"]))
             + terms["concentration"])
    return _pack(terms, total)


def theorem3_plgu_ghn(*, beta: Any, beta_v: Any, beta_h: Any, B: Any, R: Any, rho: Any,
                      spectral_bounds: Sequence[float], hn_spectral_bounds: Sequence[float],
                      d_h: float, N: Any, m_hat: Any, gamma: Any) -> BoundTerms:
    """Theorem 3 (PLGU-GHN, App. C.2): target net depth L (bounds M_l), hypernetwork depth L_h
    (bounds M^h_l = ``hn_spectral_bounds``), width d_h, descriptor norm ≤ R:

        descriptor     = B √L Π_l M_l / (γ N √m̂)
        hn_margin      = R √L_h Π_l M^h_l / (γ √N)
        hn_adversarial = (R+ρ) d_h √(L_h log L_h) Π_l M^h_l / (γ √N)
        concentration  = 2 √(log(1/γ)/N)
        total = β β_v descriptor + β_h (hn_margin + hn_adversarial) + concentration  (as printed).

    Independent of m; decreasing in N and m̂; increasing in ρ.  log L_h clipped.
    """
    beta, bv, bh = _arr("beta", beta), _arr("beta_v", beta_v), _arr("beta_h", beta_h)
    B, R, rho = _arr("B", B), _arr("R", R), _arr("rho", rho, strict=False)
    N, mh, g = _arr("N", N), _arr("m_hat", m_hat), _gamma(gamma)
    d_h = float(_arr("d_h", d_h))
    M, Mh = _bounds(spectral_bounds), _bounds(hn_spectral_bounds, "hn_spectral_bounds")
    L, Lh = M.size, Mh.size
    terms = {
        "descriptor": B * math.sqrt(L) * np.prod(M) / (g * N * np.sqrt(mh)),
        "hn_margin": R * math.sqrt(Lh) * np.prod(Mh) / (g * np.sqrt(N)),
        "hn_adversarial": (R + rho) * d_h * np.sqrt(Lh * clipped_log(Lh)) * np.prod(Mh)
                          / (g * np.sqrt(N)),
        "concentration": 2.0 * np.sqrt(np.log(1.0 / g) / N),
    }
    total = (beta * bv * terms["descriptor"] + bh * (terms["hn_margin"] + terms["hn_adversarial"])
             + terms["concentration"])
    return _pack(terms, total)


# ----------------------------------------------------------------------------- sanity tool
def linear_rademacher_bound(*, B: Any, M: Any, m: Any) -> Any:
    """B M / √m: the classical bound on the empirical Rademacher complexity of
    {x ↦ ⟨w, x⟩ : ‖w‖_2 ≤ M} on samples with ‖x_j‖_2 ≤ B (Lemma 2 at depth 1, Golowich form)."""
    return _out(_arr("B", B) * _arr("M", M) / np.sqrt(_arr("m", m)))


def empirical_rademacher_linear(x: Any, *, M: float, n_draws: int, seed: int) -> tuple[float, float]:
    """Monte-Carlo empirical Rademacher complexity of the ℓ_2 ball of radius M on samples x.

    R̂_S = E_ε sup_{‖w‖≤M} (1/m) Σ_j ε_j ⟨w, x_j⟩ = (M/m) E_ε ‖Σ_j ε_j x_j‖_2 (the sup is
    attained at w ∝ Σ ε_j x_j).  ``x`` is [m, k]; returns (estimate, standard error) over
    ``n_draws`` sign vectors drawn from ``numpy.random.default_rng(seed)``.
    """
    x = finite_array("x", x, ndim=2)
    M = float(_arr("M", M))
    n_draws = positive_int("n_draws", n_draws, minimum=2)
    rng = np.random.default_rng(seed)
    eps = rng.choice(np.array([-1.0, 1.0]), size=(n_draws, x.shape[0]))
    vals = M / x.shape[0] * np.linalg.norm(eps @ x, axis=1)
    return float(vals.mean()), float(vals.std(ddof=1) / math.sqrt(n_draws))


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
