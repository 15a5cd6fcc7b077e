"""PLGU's generalization bounds written a second time, in sympy, from the paper's text.

Qu et al., *How to Prevent the Poor Performance Clients for Personalized Federated Learning?*
(CVPR 2023): Lemmas 2–4 and Theorem 1 (appendix A), Theorem 2 (appendix B, Lemmas 5–7),
Theorem 3 (appendix C.2, Lemmas 8–10); docs/formulas.md §D.8, §E.D7–D8.  Written from the
statements, not from :mod:`pfl_theory.plgu`, so that ``verification/checks/
transcriptions_plgu.py`` can compare the two writings of the same reading.

Readings transcribed (the ones pfl_theory.plgu's docstring records):

* every log of a layer count (log D, log(L−D), log L, log(L−1), log L_h, log 3D, log 3(L−D))
  is log max(x, 2) (§E.D7; undefined or ≤ 0 at counts ≤ 1);
* max{1, q^{1/2−1/p}} with the dual exponent 1/p + 1/q = 1 (the printed "p+q=1" is a typo);
* Lemma 2's √(d+1+log n): d = width, n = input dimension;
* Lemma 4 as displayed: B (=‖x‖) on the universal block with log 3D, (B+ρ) on the personalized
  block with log 3(L−D); Theorem 1's term 4 as its O-form: Π_{l∈Per} B M_l = B^D Π_Per M_l and
  Π_{l∈Uni} (B+ρ) M_l = (B+ρ)^{L−D} Π_Uni M_l, read literally;
* Theorem 1's last term 2√(log(1/γ)/m) (appendix; the main text's √(m log(1/γ)) is a typo);
* Theorem 2 from the appendix with the leaked L_h, M^h_l read as the representation depth
  L−1 = number of representation layers and their bounds; every term over N√m̂;
* Theorem 3 as printed: β multiplies the descriptor term only.

The O(·) theorems are transcribed with constant 1.  Layer lists enter through their
aggregates (ΠM_l, Σ d_l d_{l−1} over a block, the block sizes); the aggregates are plain sums
and products.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import sympy as sp

__all__ = ["clipped_log", "lp_factor", "lemma2_margin_complexity",
           "lemma3_adversarial_complexity", "lemma4_personalized_complexity",
           "theorem1_plgu_lf", "theorem2_plgu_grep", "theorem3_plgu_ghn",
           "linear_rademacher_bound", "exact_rademacher_linear"]

# ----------------------------------------------------------------------------- symbols
B, rho, m, m_hat, N, gam, d, n, R, d_h, M_h = sp.symbols(
    "B rho m m_hat N gamma d n R d_h M_h", positive=True)
beta, beta_h, beta_phi, beta_v = sp.symbols("beta beta_h beta_phi beta_v", positive=True)
p, x = sp.symbols("p x", positive=True)
L, D, L_h = sp.symbols("L D L_h", nonnegative=True, integer=True)
M_all, M_per, M_uni, M_hn = sp.symbols("M_all M_per M_uni M_hn", positive=True)  # Π M_l
S_all, S_per, S_uni = sp.symbols("S_all S_per S_uni", nonnegative=True)  # Σ d_l d_{l-1}
lp = sp.Symbol("lp", positive=True)  # max{1, q^{1/2-1/p}}


def _clog(v):
    """log max(v, 2) (§E.D7 edge-case reading)."""
    return sp.log(sp.Max(v, 2))


#: max{1, q^{1/2 − 1/p}}, q = p/(p − 1), for 1 < p < ∞ (Lemma 3, from Xiao et al.)
LP_FACTOR = sp.Max(1, (p / (p - 1)) ** (sp.Rational(1, 2) - 1 / p))
CLIPPED_LOG = _clog(x)
#: Lemma 2: R_U(G_u) ≤ 2B√(d+1+log n) Π_l M_l / √m
LEMMA2 = 2 * B * sp.sqrt(d + 1 + sp.log(n)) * M_all / sp.sqrt(m)
#: Lemma 3: R_U(G̃_u) ≤ 24 max{1,q^{1/2−1/p}} (‖x‖+ρ)/(γ√m) √(Σ_l d_l d_{l−1} log 3L) Π_l M_l
LEMMA3 = 24 * lp * (B + rho) / (gam * sp.sqrt(m)) * sp.sqrt(S_all * sp.log(3 * L)) * M_all
#: Lemma 4, displayed form (margin part = Lemma 2 over m̂; adversarial part over the blocks)
LEMMA4 = {
    "margin": 2 * B * sp.sqrt(d + 1 + sp.log(n)) * M_all / sp.sqrt(m_hat),
    "adversarial": (24 * sp.sqrt(D * (L - D)) / (gam * sp.sqrt(m_hat)) * lp
                    * B * sp.sqrt(S_uni * _clog(3 * D)) * M_uni
                    * (B + rho) * sp.sqrt(S_per * _clog(3 * (L - D))) * M_per),
}
#: Theorem 1 (PLGU-LF), the four complexity terms inside β(·) and the concentration term
THEOREM1 = {
    "global_margin": B * sp.sqrt(L) * M_all / (gam * sp.sqrt(m)),
    "global_adversarial": (B + rho) * d * sp.sqrt(L * _clog(L)) * M_all / (gam * sp.sqrt(m)),
    "personalized_margin": B * sp.sqrt(L) * M_all / (gam * N * sp.sqrt(m_hat)),
    "personalized_adversarial": (d * D * (L - D) * sp.sqrt(_clog(D)) * B ** D * M_per
                                 * sp.sqrt(_clog(L - D)) * (B + rho) ** (L - D) * M_uni
                                 / (gam * N * sp.sqrt(m_hat))),
    "concentration": 2 * sp.sqrt(sp.log(1 / gam) / m),
}
THEOREM1_TOTAL = beta * sum(v for k, v in THEOREM1.items() if k != "concentration") \
    + THEOREM1["concentration"]
#: Theorem 2 (PLGU-GRep, appendix B); L here is the number of representation layers (= L−1)
THEOREM2 = {
    "head": B * M_h / (gam * N * sp.sqrt(m_hat)),
    "representation_margin": B * sp.sqrt(L) * M_all / (gam * N * sp.sqrt(m_hat)),
    "representation_adversarial": ((B + rho) * d * sp.sqrt(L * _clog(L)) * M_all
                                   / (gam * N * sp.sqrt(m_hat))),
    "concentration": 2 * sp.sqrt(sp.log(1 / gam) / N),
}
THEOREM2_TOTAL = beta * (beta_h * THEOREM2["head"] + beta_phi * (
    THEOREM2["representation_margin"] + THEOREM2["representation_adversarial"])) \
    + THEOREM2["concentration"]
#: Theorem 3 (PLGU-GHN, appendix C.2): target depth L, hypernetwork depth L_h
THEOREM3 = {
    "descriptor": B * sp.sqrt(L) * M_all / (gam * N * sp.sqrt(m_hat)),
    "hn_margin": R * sp.sqrt(L_h) * M_hn / (gam * sp.sqrt(N)),
    "hn_adversarial": (R + rho) * d_h * sp.sqrt(L_h * _clog(L_h)) * M_hn / (gam * sp.sqrt(N)),
    "concentration": 2 * sp.sqrt(sp.log(1 / gam) / N),
}
THEOREM3_TOTAL = beta * beta_v * THEOREM3["descriptor"] \
    + beta_h * (THEOREM3["hn_margin"] + THEOREM3["hn_adversarial"]) + THEOREM3["concentration"]
#: Lemma 2 at depth 1 (linear class ‖w‖ ≤ M, ‖x‖ ≤ B): B M / √m
M_lin = sp.Symbol("M", positive=True)
LINEAR_RADEMACHER = B * M_lin / sp.sqrt(m)


def _fn(args, expr):
    return sp.lambdify(args, expr, modules="numpy")


_T1_ARGS = (beta, B, rho, d, L, D, M_all, M_per, M_uni, m, N, m_hat, gam)
_T2_ARGS = (beta, beta_h, beta_phi, B, rho, M_h, d, L, M_all, N, m_hat, gam)
_T3_ARGS = (beta, beta_v, beta_h, B, R, rho, d_h, L, L_h, M_all, M_hn, N, m_hat, gam)
_F = {
    "lp": _fn((p,), LP_FACTOR), "clog": _fn((x,), CLIPPED_LOG),
    "lemma2": _fn((B, d, n, M_all, m), LEMMA2),
    "lemma3": _fn((lp, B, rho, gam, m, S_all, L, M_all), LEMMA3),
    "lemma4": {k: _fn((lp, B, rho, gam, m_hat, d, n, L, D, M_all, M_uni, M_per, S_uni, S_per), v)
               for k, v in LEMMA4.items()},
    "theorem1": {k: _fn(_T1_ARGS, v) for k, v in {**THEOREM1, "total": THEOREM1_TOTAL}.items()},
    "theorem2": {k: _fn(_T2_ARGS, v) for k, v in {**THEOREM2, "total": THEOREM2_TOTAL}.items()},
    "theorem3": {k: _fn(_T3_ARGS, v) for k, v in {**THEOREM3, "total": THEOREM3_TOTAL}.items()},
    "linear": _fn((B, M_lin, m), LINEAR_RADEMACHER),
}


# ----------------------------------------------------------------------------- layer aggregates
def _blocks(spectral_bounds: Sequence[float], widths: Sequence[int] | None = None,
            personalized_layers: Sequence[int] = ()) -> dict[str, float]:
    """ΠM_l and Σ d_l d_{l−1} over all layers and over the personalized (0-based indices of
    layers 1..L) and universal blocks."""
    Ms = [float(v) for v in spectral_bounds]
    per = set(int(i) for i in personalized_layers)
    out = {"L": len(Ms), "D": len(per), "M_all": math.prod(Ms),
           "M_per": math.prod(Ms[i] for i in per),
           "M_uni": math.prod(Ms[i] for i in range(len(Ms)) if i not in per)}
    if widths is not None:
        dd = [float(widths[i + 1]) * float(widths[i]) for i in range(len(Ms))]
        out.update(S_all=sum(dd), S_per=sum(dd[i] for i in per),
                   S_uni=sum(dd[i] for i in range(len(Ms)) if i not in per))
    return out


def clipped_log(v: float) -> float:
    return float(_F["clog"](float(v)))


def lp_factor(p_value: float) -> float:
    """max{1, q^{1/2−1/p}}; at p = 1 (q = ∞: ∞^{−1/2} → 0) and p = ∞ (q = 1) it is 1."""
    if p_value == 1.0 or math.isinf(p_value):
        return 1.0
    return float(_F["lp"](float(p_value)))


def lemma2_margin_complexity(*, B, spectral_bounds, m, d, n) -> dict[str, float]:
    v = float(_F["lemma2"](B, d, n, _blocks(spectral_bounds)["M_all"], m))
    return {"margin": v, "total": v}


def lemma3_adversarial_complexity(*, B, rho, spectral_bounds, widths, m, gamma, p=2.0
                                  ) -> dict[str, float]:
    a = _blocks(spectral_bounds, widths)
    v = float(_F["lemma3"](lp_factor(p), B, rho, gamma, m, a["S_all"], a["L"], a["M_all"]))
    return {"adversarial": v, "total": v}


def lemma4_personalized_complexity(*, B, rho, spectral_bounds, widths, personalized_layers,
                                   m_hat, gamma, d, n, p=2.0) -> dict[str, float]:
    a = _blocks(spectral_bounds, widths, personalized_layers)
    out = {k: float(f(lp_factor(p), B, rho, gamma, m_hat, d, n, a["L"], a["D"], a["M_all"],
                      a["M_uni"], a["M_per"], a["S_uni"], a["S_per"]))
           for k, f in _F["lemma4"].items()}
    return {**out, "total": out["margin"] + out["adversarial"]}


def theorem1_plgu_lf(*, beta, B, rho, spectral_bounds, d, personalized_layers, m, N, m_hat,
                     gamma) -> dict[str, float]:
    a = _blocks(spectral_bounds, None, personalized_layers)
    return {k: float(f(beta, B, rho, d, a["L"], a["D"], a["M_all"], a["M_per"], a["M_uni"],
                       m, N, m_hat, gamma)) for k, f in _F["theorem1"].items()}


def theorem2_plgu_grep(*, beta, beta_h, beta_phi, B, rho, M_h, spectral_bounds, d, N, m_hat,
                       gamma) -> dict[str, float]:
    a = _blocks(spectral_bounds)
    return {k: float(f(beta, beta_h, beta_phi, B, rho, M_h, d, a["L"], a["M_all"], N, m_hat,
                       gamma)) for k, f in _F["theorem2"].items()}


def theorem3_plgu_ghn(*, beta, beta_v, beta_h, B, R, rho, spectral_bounds, hn_spectral_bounds,
                      d_h, N, m_hat, gamma) -> dict[str, float]:
    a, h = _blocks(spectral_bounds), _blocks(hn_spectral_bounds)
    return {k: float(f(beta, beta_v, beta_h, B, R, rho, d_h, a["L"], h["L"], a["M_all"],
                       h["M_all"], N, m_hat, gamma)) for k, f in _F["theorem3"].items()}


def linear_rademacher_bound(*, B, M, m) -> float:
    return float(_F["linear"](B, M, m))


def exact_rademacher_linear(x_samples: np.ndarray, M: float) -> tuple[float, float]:
    """Exact empirical Rademacher complexity of {x ↦ ⟨w, x⟩ : ‖w‖_2 ≤ M} on the rows of
    ``x_samples`` (§E.D8) by enumerating all 2^m sign vectors: E_ε sup_w (1/m) Σ_j ε_j⟨w, x_j⟩
    = (M/m) E_ε ‖Σ_j ε_j x_j‖_2 (Cauchy–Schwarz, attained at w ∝ Σ ε_j x_j).  Returns (mean,
    standard deviation) of (M/m)‖Σ ε_j x_j‖ over the uniform sign vectors (m ≤ 16)."""
    xs = np.asarray(x_samples, dtype=np.float64)
    count = xs.shape[0]
    if count > 16:
        raise ValueError(f"exact enumeration needs at most 16 samples, got {count}")
    signs = 1.0 - 2.0 * ((np.arange(2 ** count)[:, None] >> np.arange(count)) & 1)
    values = M / count * np.linalg.norm(signs @ xs, axis=1)
    return float(values.mean()), float(values.std())
