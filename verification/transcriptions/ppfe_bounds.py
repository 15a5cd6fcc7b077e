"""PPFE's generalization bounds, Lemma 9, the boosting bias and the choice of T written a
second time, in sympy, from the (reconstructed) statements.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), Section 5; docs/formulas.md §C.1, C.5.3,
C.5.4, C.5.10–C.5.12.  Every display is RECONSTRUCTED (the seed lost them); transcribed here
is the reading pfl_theory.ppfe_bounds documents, written independently of it for the identity
checks in ``verification/checks/transcriptions_ppfe_bounds.py``:

* Theorem 7 (eq. 24) and Corollary 2 (eqs. 29–30) with every hidden constant 1 and the logs
  dropped; the depth factor L kept (or folded into the constant when asked);
* S_T(γ) = Σ_{t=1}^{T−1} t γ^{2t} in the closed form sympy derives for the geometric-type sum;
* Lemma 9 with the endpoint correction (interior minimiser only for κ > κ† ≈ 3.134), its
  roots written with the Lambert W function: e^u/√u = κ ⇔ −2u e^{−2u} = −2/κ², so the larger
  root is u₂ = −½ W₋₁(−2/κ²), and κ† = e^{u†}/√u† with e^{u†} = 1 + 2u†, i.e.
  u† = −W₋₁(−1/(2√e)) − ½;
* Theorem 2 (eq. 14, Mohri et al. 2018 Thm 6.1): Π 2√(ε_t(1−ε_t)) ≤ exp(−2Σ(½−ε_t)²) ≤
  exp(−2γ²T), γ = min_t(½ − ε_t);
* κ₀ = B √(log(⌈A/ε_α⌉ + 1)/2) [DERIVED]; the SAMME edge (1 − 1/C − ε)·C/(2(C − 1))
  [toolkit normalisation]; the choice of T as the brute-force minimiser of
  e^{−2γ²T} + κ₀√(T/n) over T = 1..t_max.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import sympy as sp

# ----------------------------------------------------------------------------- symbols
L, T, N, nbar, delta, w, n = sp.symbols("L T N nbar delta w n", positive=True)
P_sh, P_pers, S = sp.symbols("P_sh P_pers S", nonnegative=True)
g, r = sp.symbols("gamma r", positive=True)
a, b, c, u, kappa = sp.symbols("a b c u kappa", positive=True)
eps, B_loss, A_coef, eps_alpha, C_cls = sp.symbols("epsilon B A epsilon_alpha C", positive=True)
d_out, d_in = sp.symbols("d_l d_lm1", positive=True, integer=True)
t = sp.Symbol("t", positive=True, integer=True)

#: §C.1: parameters of one fully connected layer (weights and biases), d_l (d_{l−1} + 1)
LAYER_PARAMETERS = d_out * (d_in + 1)
#: Theorem 7 (eq. 24), constants 1, logs dropped
THEOREM7 = {
    "shared": sp.sqrt(L * P_sh / (N * nbar)),
    "personalized": sp.sqrt(L * P_pers / nbar),
    "boosting": sp.sqrt(T / nbar),
    "confidence": sp.sqrt(sp.log(1 / delta) / (N * nbar)),
}
#: S_T(γ) with r = γ²: Σ_{t=1}^{T−1} t r^t, closed form derived by sympy (r ≠ 1 branch)
_S_SUM = sp.summation(t * r ** t, (t, 1, T - 1))
S_T_CLOSED = sp.simplify(_S_SUM.args[-1][0] if isinstance(_S_SUM, sp.Piecewise) else _S_SUM)
S_T_AT_ONE = T * (T - 1) / 2
#: Corollary 2 (eqs. 29–30), equal sizes n, personalized widths w γ_w^t
COROLLARY2 = {
    "shared": w * sp.sqrt(L * T / (N * n)),
    "personalized": w * sp.sqrt(S / n),
    "boosting": sp.sqrt(T / n),
    "confidence": sp.sqrt(sp.log(1 / delta) / (N * n)),
}
#: Lemma 9: φ(x) = a x + √(b log(c/x)), κ = 2ac/√b, larger critical root u₂ (Lambert W₋₁)
PHI = a * sp.Symbol("x") + sp.sqrt(b * sp.log(c / sp.Symbol("x")))
KAPPA = 2 * a * c / sp.sqrt(b)
U2 = -sp.LambertW(-2 / kappa ** 2, -1) / 2
U_DAGGER = -sp.LambertW(-1 / (2 * sp.sqrt(sp.E)), -1) - sp.Rational(1, 2)
KAPPA_DAGGER = sp.exp(U_DAGGER) / sp.sqrt(U_DAGGER)
#: two-term asymptotics (b → 0): u₂ ≈ log κ + ½ log log κ, x* ≈ √b/(2a√u₂), φ* ≈ √(bu₂)(1 + 1/(2u₂))
U2_ASYMPTOTIC = sp.log(kappa) + sp.log(sp.log(kappa)) / 2
#: Theorem 2 (eq. 14): per-stage normaliser Z_t = 2√(ε_t(1 − ε_t)); bias exp(−2γ²T)
Z_STAGE = 2 * sp.sqrt(eps * (1 - eps))
EDGE_SQ = (sp.Rational(1, 2) - eps) ** 2
BIAS = sp.exp(-2 * g ** 2 * T)
#: κ₀ = B √(log(⌈A/ε_α⌉ + 1) / 2)
KAPPA0 = B_loss * sp.sqrt(sp.log(sp.ceiling(A_coef / eps_alpha) + 1) / 2)
#: SAMME edge normalised to the binary scale
SAMME_EDGE = (1 - 1 / C_cls - eps) * C_cls / (2 * (C_cls - 1))
#: the bias–variance curve e^{−2γ²T} + κ₀ √(T/n)
K0 = sp.Symbol("kappa0", positive=True)
VARIANCE = K0 * sp.sqrt(T / n)
B_PRIME = K0 ** 2 / (2 * g ** 2 * n)

_F = {
    "theorem7": {k: sp.lambdify((L, P_sh, P_pers, T, N, nbar, delta), v)
                 for k, v in THEOREM7.items()},
    "s_t": sp.lambdify((T, r), S_T_CLOSED), "s_t_one": sp.lambdify((T,), S_T_AT_ONE),
    "corollary2": {k: sp.lambdify((w, L, T, N, n, S, delta), v) for k, v in COROLLARY2.items()},
    "phi": sp.lambdify((a, b, c, sp.Symbol("x")), PHI),
    "kappa": sp.lambdify((a, b, c), KAPPA),
    "u2": sp.lambdify((kappa,), U2, modules=["scipy", "numpy"]),
    "u2_asym": sp.lambdify((kappa,), U2_ASYMPTOTIC),
    "z": sp.lambdify((eps,), Z_STAGE), "edge_sq": sp.lambdify((eps,), EDGE_SQ),
    "bias": sp.lambdify((g, T), BIAS), "kappa0": sp.lambdify((B_loss, A_coef, eps_alpha), KAPPA0),
    "samme": sp.lambdify((eps, C_cls), SAMME_EDGE), "variance": sp.lambdify((K0, T, n), VARIANCE),
    "b_prime": sp.lambdify((K0, g, n), B_PRIME),
}
KAPPA_DAGGER_VALUE = float(sp.N(KAPPA_DAGGER, 30))


def stage_parameter_counts(stage_widths: Sequence[Sequence[int]]
                           ) -> tuple[list[float], list[float]]:
    """Stage t (0-based) shares layers 1..L−t and personalizes layers L−t+1..L (§C.5.3)."""
    shared, personal = [], []
    for t_idx, widths in enumerate(stage_widths):
        depth = len(widths) - 1
        per_layer = [int(LAYER_PARAMETERS.subs({d_out: widths[k], d_in: widths[k - 1]}))
                     for k in range(1, depth + 1)]
        shared.append(float(sum(per_layer[:depth - t_idx])))
        personal.append(float(sum(per_layer[depth - t_idx:])))
    return shared, personal


def harmonic_mean(sizes: Sequence[int]) -> float:
    """n̄ with 1/n̄ = (1/N) Σ 1/n_i, in exact rational arithmetic."""
    return float(len(sizes) / sum(sp.Rational(1, int(s)) for s in sizes))


def theorem7_terms(stage_widths, *, sizes, delta, depth_factor=True) -> dict[str, float]:
    shared, personal = stage_parameter_counts(stage_widths)
    depth = (len(stage_widths[0]) - 1) if depth_factor else 1
    args = (depth, sum(shared), sum(personal[1:]), len(stage_widths), len(sizes),
            harmonic_mean(sizes), delta)
    out = {k: float(f(*args)) for k, f in _F["theorem7"].items()}
    return {**out, "total": sum(out.values())}


def s_t(num_stages: int, gamma_w: float) -> float:
    if gamma_w == 1.0:
        return float(_F["s_t_one"](num_stages))
    return float(_F["s_t"](num_stages, gamma_w ** 2))


def corollary2_terms(*, width, depth, num_stages, n, num_clients, gamma_w, delta
                     ) -> dict[str, float]:
    out = {k: float(f(width, depth, num_stages, num_clients, n, s_t(num_stages, gamma_w), delta))
           for k, f in _F["corollary2"].items()}
    return {**out, "total": sum(out.values())}


def lemma9_minimize(a_: float, b_: float, c_: float) -> dict[str, float]:
    """x*, φ(x*), u* = log(c/x*), κ and interior (1.0/0.0) by the Lambert-W root."""
    k = float(_F["kappa"](a_, b_, c_))
    if k > KAPPA_DAGGER_VALUE:
        u_star = float(np.real(_F["u2"](k)))
        x_star = c_ * math.exp(-u_star)
    else:
        u_star, x_star = 0.0, c_
    return {"x_star": x_star, "value": float(_F["phi"](a_, b_, c_, x_star)), "u_star": u_star,
            "kappa": k, "interior": float(k > KAPPA_DAGGER_VALUE)}


def lemma9_asymptotic(a_: float, b_: float, c_: float) -> dict[str, float]:
    u2 = float(_F["u2_asym"](float(_F["kappa"](a_, b_, c_))))
    return {"u_star": u2, "x_star": math.sqrt(b_) / (2 * a_ * math.sqrt(u2)),
            "value": math.sqrt(b_ * u2) * (1 + 1 / (2 * u2))}


def boosting_bias_bound(gamma: float, num_stages) -> np.ndarray:
    return np.asarray(_F["bias"](gamma, np.asarray(num_stages, dtype=float)), dtype=float)


def adaboost_bound_chain(errors: Sequence[float]) -> dict[str, np.ndarray]:
    e = [float(v) for v in errors]
    gam = min(0.5 - v for v in e)
    stages = np.arange(1, len(e) + 1, dtype=float)
    prefixes = range(1, len(e) + 1)
    return {"product": np.array([math.prod(float(_F["z"](v)) for v in e[:k]) for k in prefixes]),
            "exp_sum": np.array([math.exp(-2 * sum(float(_F["edge_sq"](v)) for v in e[:k]))
                                 for k in prefixes]),
            "exp_gamma": boosting_bias_bound(gam, stages),
            "gamma": np.full(len(e), gam)}


def kappa0_from_ingredients(*, loss_bound=1.0, coef_bound=1.0, eps_alpha=0.01) -> float:
    return float(_F["kappa0"](loss_bound, coef_bound, eps_alpha))


def stage_edge(errors: Sequence[float], *, num_classes: int = 2) -> float:
    return min(float(_F["samme"](float(v), num_classes)) for v in errors)


def select_stages(*, gamma, kappa0, n, t_max) -> dict[str, object]:
    """Brute force over T = 1..t_max; the continuous optimum from Lemma 9 with a = c = 1."""
    ts = np.arange(1, t_max + 1, dtype=float)
    bias = boosting_bias_bound(gamma, ts)
    var = np.array([float(_F["variance"](kappa0, v, n)) for v in ts])
    bp = float(_F["b_prime"](kappa0, gamma, n))
    k = 2.0 / math.sqrt(bp)  # κ = 2ac/√b' with a = c = 1
    interior = k > KAPPA_DAGGER_VALUE
    t_cont = float(np.real(_F["u2"](k))) / (2 * gamma ** 2) if interior else 0.0
    return {"t_star": float(ts[int(np.argmin(bias + var))]), "t_star_continuous": t_cont,
            "interior": float(interior), "b_prime": bp, "kappa": k, "ts": ts, "bias": bias,
            "variance": var, "bound": bias + var}
