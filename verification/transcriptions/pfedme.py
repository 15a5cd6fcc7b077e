"""pFedMe's formulas written a second time, in sympy, straight from the paper's statements.

Paper: C. T. Dinh, N. H. Tran, T. D. Nguyen, *Personalized Federated Learning with Moreau
Envelopes*, NeurIPS 2020 (equation numbers of the NeurIPS version).  Transcribed from the
formula specification (docs/formulas.md §B.3–§B.6), not from :mod:`pfl_theory.pfedme`; the
identity checks (:mod:`verification.checks.transcriptions_pfedme`) compare the two writings
at random points.  The readings are the ones docs/formulas.md documents:

* Proposition 1: L_F = λ, μ_F = λμ/(λ+μ), κ_F = L_F/μ_F;
* Lemma 1: δ² with (λ+μ)² under A1(a) and (λ−L)² under A1(b) (layout reading, §B.5);
* Lemma 2(b): numerators 8L² on ‖∇F‖² and 2λ² on σ_f² (the only assignment with the
  λ → ∞ limit 2σ_f², §B.5);
* Theorems 1 and 2: hidden constants 1, polylogs dropped; Theorem 2(a)'s third term
  Δ_F^{2/3}(Rσ² + λ²δ²)^{1/3}/(β^{4/3} R^{r} T^{2/3}) with the R exponent r a symbol (the
  printed layout gives 1/3, UNCERTAIN, §B.6);
* Corollary 1(i): β = √(N/T) when N ≥ T (default reading) or β = √N/T when √N ≥ T
  (alternative reading, UNCERTAIN); (ii) β = NR otherwise;
* Corollary 2: β = N^{1/2}R^{1/4} and T from T^{1/3} = (NR)^{2/3}.

Every expression's free symbols are named like the keyword arguments of the corresponding
:mod:`pfl_theory.pfedme` function, so one dict of values feeds both (:func:`evaluate`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import sympy as sp

from verification.transcriptions.compiled import Compiled

_P = {"positive": True}
lam, mu, L = sp.symbols("lam mu L", **_P)
gamma_f_sq, batch_size, nu = sp.symbols("gamma_f_sq batch_size nu", **_P)
T, R, N, S, beta = sp.symbols("T R N S beta", **_P)
delta_sq, Delta0, Delta_F = sp.symbols("delta_sq Delta0 Delta_F", **_P)
sigma_F1_sq, sigma_F2_sq, sigma_f_sq = sp.symbols("sigma_F1_sq sigma_F2_sq sigma_f_sq", **_P)
F_gap, grad_F_norm_sq, grad_norm_sq = sp.symbols("F_gap grad_F_norm_sq grad_norm_sq", **_P)
eta_hat, r_exponent = sp.symbols("eta_hat r_exponent", **_P)

# Proposition 1 (envelope constants).
L_F = lam
MU_F = lam * mu / (lam + mu)
KAPPA_F = L_F / MU_F

# Lemma 1: E‖θ̃ − θ̂‖² ≤ δ².
_NOISE = gamma_f_sq / batch_size + nu
DELTA_SQ_A = 2 / (lam + mu) ** 2 * _NOISE            # A1(a), μ-strongly convex
DELTA_SQ_B = 2 / (lam - L) ** 2 * _NOISE             # A1(b), L-smooth, λ > L

# Lemma 2: diversity of the envelope gradients.
LEMMA2A = 4 * L_F * F_gap + 2 * sigma_F1_sq                      # (a)
SIGMA_F2_SQ = 2 * lam ** 2 / (lam ** 2 - 8 * L ** 2) * sigma_f_sq  # (b), σ²_{F,2}
LEMMA2B = 8 * L ** 2 / (lam ** 2 - 8 * L ** 2) * grad_F_norm_sq + SIGMA_F2_SQ

# Step sizes and the horizon condition of Theorems 1 and 2.
ETA_HAT_1 = 1 / (6 * L_F * (3 + 128 * KAPPA_F / beta))
ETA_HAT_2 = 1 / (75 * L_F * lam ** 2)
LOCAL_STEP = eta_hat / (beta * R)                      # η ≤ η̂/(βR)
MIN_ROUNDS_1 = 2 / (ETA_HAT_1 * MU_F)                  # T ≥ 2/(η̂₁ μ_F)

# Theorem 1 (strongly convex): (a) E[F(w̄_T) − F*] and (b) the personalized ball.
THEOREM1A = {
    "initial": Delta0 * MU_F * sp.exp(-ETA_HAT_1 * MU_F * T / 2),
    "sampling": (N / S - 1) * sigma_F1_sq / (MU_F * T * N),
    "drift": (R * sigma_F1_sq + delta_sq * lam ** 2) * KAPPA_F / (R * (T * beta * MU_F) ** 2),
    "neighbourhood": lam ** 2 * delta_sq / MU_F,
}
THEOREM1B = {"optimality": F_gap, "diversity": sigma_F1_sq / lam ** 2,
             "approximation": delta_sq}

# Theorem 2 (non-convex): (a) E‖∇F(w_{t*})‖² and (b) the personalized ball.
THEOREM2A = {
    "initial": Delta_F / (ETA_HAT_2 * T),
    "sampling": (sp.sqrt(Delta_F * L_F * sigma_F2_sq) * sp.sqrt(N / S - 1)
                 / sp.sqrt(T * N)),
    "drift": (Delta_F ** sp.Rational(2, 3) * (R * sigma_F2_sq + lam ** 2 * delta_sq)
              ** sp.Rational(1, 3)
              / (beta ** sp.Rational(4, 3) * R ** r_exponent * T ** sp.Rational(2, 3))),
    "neighbourhood": lam ** 2 * delta_sq,
}
THEOREM2B = {"optimality": grad_norm_sq, "diversity": sigma_F2_sq / lam ** 2,
             "approximation": delta_sq}

# Corollaries (S = N, constants 1).
COROLLARY1_BETA = {
    "sqrt(N/T)": sp.Piecewise((sp.sqrt(N / T), N >= T), (N * R, True)),
    "sqrt(N)/T": sp.Piecewise((sp.sqrt(N) / T, sp.sqrt(N) >= T), (N * R, True)),
}
COROLLARY1_REGIME_I = {"sqrt(N/T)": N >= T, "sqrt(N)/T": sp.sqrt(N) >= T}
COROLLARY2_BETA = sp.sqrt(N) * R ** sp.Rational(1, 4)
COROLLARY2_T = sp.solve(sp.Eq(T ** sp.Rational(1, 3), (N * R) ** sp.Rational(2, 3)), T)[0]


def _terms(prefix: str, terms: Mapping[str, sp.Expr]) -> dict[str, sp.Expr]:
    out = {f"{prefix}.{k}": v for k, v in terms.items()}
    out[f"{prefix}.total"] = sp.Add(*terms.values())
    return out


#: every scalar formula by name (a theorem's terms as ``theorem1a.<term>`` and ``.total``)
EXPRESSIONS: dict[str, sp.Expr] = {
    "lemma1_delta_sq.mu": DELTA_SQ_A, "lemma1_delta_sq.L": DELTA_SQ_B,
    "lemma2a_bound": LEMMA2A, "sigma_F2_sq": SIGMA_F2_SQ, "lemma2b_bound": LEMMA2B,
    "eta_hat_1": ETA_HAT_1, "eta_hat_2": ETA_HAT_2, "local_step_bound": LOCAL_STEP,
    "min_rounds_theorem1": MIN_ROUNDS_1,
    **_terms("theorem1a", THEOREM1A), **_terms("theorem1b", THEOREM1B),
    **_terms("theorem2a", THEOREM2A), **_terms("theorem2b", THEOREM2B),
    "corollary1_beta.sqrt(N/T)": COROLLARY1_BETA["sqrt(N/T)"],
    "corollary1_beta.sqrt(N)/T": COROLLARY1_BETA["sqrt(N)/T"],
    "corollary2_choice.beta": COROLLARY2_BETA, "corollary2_choice.T": COROLLARY2_T,
}


_FORMULAS = Compiled(EXPRESSIONS)
#: formula ``name`` of :data:`EXPRESSIONS` in float64 (broadcast), and its argument names
evaluate, arguments = _FORMULAS.evaluate, _FORMULAS.arguments


def corollary1_regime(reading: str, *, N: float, T: float) -> str:
    """``"i"`` when Corollary 1's massive-clients condition holds (N ≥ T, or √N ≥ T for the
    alternative reading), else ``"ii"``."""
    cond = COROLLARY1_REGIME_I[reading].subs({sp.Symbol("N", positive=True): N,
                                              sp.Symbol("T", positive=True): T})
    return "i" if bool(cond) else "ii"


def mean_squared_norm(grads: Any) -> float:
    """σ²_{F,1} = (1/N) Σ_i ‖∇F_i(w*)‖² (Lemma 2(a)) for rows ``grads`` [N, d]."""
    g = np.asarray(grads, dtype=np.float64)
    return float(sum(float(row @ row) for row in g) / g.shape[0])


def diversity(grads: Any) -> float:
    """(1/N) Σ_i ‖g_i − (1/N)Σ_j g_j‖² (the left side of Lemma 2 and A3) for rows [N, d]."""
    g = np.asarray(grads, dtype=np.float64)
    centre = g.sum(axis=0) / g.shape[0]
    return float(sum(float((row - centre) @ (row - centre)) for row in g) / g.shape[0])


#: transcription symbol → keyword of pfl_theory.pfedme.theorem1a/1b and theorem2a/2b
THEOREM1_NAMES = {"T": "T", "R": "R", "N": "N", "S": "S", "beta": "beta", "lambda": "lam",
                  "mu": "mu", "delta_sq": "delta_sq", "sigma_sq": "sigma_F1_sq",
                  "Delta_0": "Delta0"}
THEOREM2_NAMES = {"T": "T", "R": "R", "N": "N", "S": "S", "beta": "beta", "lambda": "lam",
                  "delta_sq": "delta_sq", "sigma_sq": "sigma_F2_sq", "Delta_F": "Delta_F",
                  "r_exp": "r_exponent"}
