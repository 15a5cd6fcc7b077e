"""PPFE's covering numbers and concentration (Lemmas 4, 5, 6, 8 and eqs. 26–27) written a
second time, in sympy, from the (reconstructed) statements.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), Section 5 and Appendix; docs/formulas.md
§C.1, §C.5.6–C.5.9.  The lemma statements are RECONSTRUCTED (the seed lost every display);
transcribed here is the reading pfl_theory.ppfe_covering documents, written independently of
it for the identity checks in ``verification/checks/transcriptions_ppfe_covering.py``:

* Lemma 4 (§C.5.6): A_0 = B_x, A_l = L_σ(d_{l−1} M A_{l−1} + M) + c_0 (l = 1..L−1),
  Λ = Σ_{l=1}^{L} c_l (d_{l−1} A_{l−1} + 1) Π_{k=l+1}^{L} c_k d_{k−1} M with c_l = L_σ (l < L),
  c_L = 1, and log N ≤ P log(1 + ⌈MΛ/ε⌉), P = Σ_l d_l (d_{l−1} + 1).  Evaluated here in exact
  rational arithmetic (sympy), logs at the end: no overflow at any depth, no round-off in
  the recursion;
* Lemma 5 (§C.5.7): N(G∘F, ε_g + L_g ε_f) ≤ N(G, ε_g) N(F, ε_f);
* Lemma 6 (§C.5.8, eq. 22): radius A Σ_t ε_t + T B_h ε_α, log-size
  Σ_t log N(H_t, ε_t) + T log(⌈A/ε_α⌉ + 1), the α-grid of ⌈A/ε_α⌉ + 1 points on [−A, A]
  covering it at radius ε_α;
* Lemma 8 (§C.5.9): B √(log(2/δ)/(2 N n̄)), 1/n̄ = (1/N) Σ 1/n_i; eqs. (26)–(27):
  inf_ε {2 L_ℓ ε + B √((log N_tot(ε) + log(2/δ))/(2 N n̄))}, minimised here by a dense log
  grid and a bounded scalar refinement of our own.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import sympy as sp
from scipy import optimize

d_out, d_in = sp.symbols("d_l d_lm1", positive=True, integer=True)
M, EPS, lam, eps_g, eps_f, L_g = sp.symbols("M epsilon Lambda epsilon_g epsilon_f L_g",
                                            positive=True)
A, B_h, eps_alpha, T, S_eps = sp.symbols("A B_h epsilon_alpha T S_eps", positive=True)
B, delta, N, nbar, L_loss, logN = sp.symbols("B delta N nbar L_ell logN", positive=True)

#: §C.1 parameters of one layer
LAYER_PARAMETERS = d_out * (d_in + 1)
#: Lemma 4: per-parameter grid count ⌈MΛ/ε⌉ + 1
LEMMA4_GRID = sp.ceiling(M * lam / EPS) + 1
#: Lemma 5: radius and log-size of the product cover
LEMMA5_RADIUS = eps_g + L_g * eps_f
#: Lemma 6: radius and the coefficient-grid part of the log-size
LEMMA6_RADIUS = A * S_eps + T * B_h * eps_alpha
ALPHA_GRID_SIZE = sp.ceiling(A / eps_alpha) + 1
LEMMA6_ALPHA_LOG = T * sp.log(ALPHA_GRID_SIZE)
#: Lemma 8 and the union bound (eqs. 26–27) at radius ε
LEMMA8 = B * sp.sqrt(sp.log(2 / delta) / (2 * N * nbar))
UNION_BOUND = 2 * L_loss * EPS + B * sp.sqrt((logN + sp.log(2 / delta)) / (2 * N * nbar))

_F = {
    "lemma5": sp.lambdify((eps_g, eps_f, L_g), LEMMA5_RADIUS),
    "lemma6_radius": sp.lambdify((A, S_eps, T, B_h, eps_alpha), LEMMA6_RADIUS),
    "alpha_size": sp.lambdify((A, eps_alpha), ALPHA_GRID_SIZE),
    "alpha_log": sp.lambdify((T, A, eps_alpha), LEMMA6_ALPHA_LOG),
    "lemma8": sp.lambdify((B, delta, N, nbar), LEMMA8),
    "union": sp.lambdify((L_loss, EPS, B, logN, delta, N, nbar), UNION_BOUND),
}


def fc_parameter_count(widths: Sequence[int]) -> int:
    return int(sum(LAYER_PARAMETERS.subs({d_out: widths[k], d_in: widths[k - 1]})
                   for k in range(1, len(widths))))


def _q(v: float) -> sp.Rational:
    """The exact rational value of a float."""
    return sp.Rational(float(v))


def lemma4_constants_exact(widths, *, weight_bound, input_bound, act_lipschitz=1.0,
                           act_at_zero=0.0) -> tuple[list[sp.Rational], sp.Rational]:
    """(A_0..A_{L−1}, Λ) exactly (rational arithmetic on the floats given)."""
    Mq, Lsig, c0 = _q(weight_bound), _q(act_lipschitz), _q(act_at_zero)
    depth = len(widths) - 1
    acts = [_q(input_bound)]
    for layer in range(1, depth):
        acts.append(Lsig * (widths[layer - 1] * Mq * acts[-1] + Mq) + c0)
    c = [None] + [Lsig] * (depth - 1) + [sp.Integer(1)]  # c_1..c_L
    lam_value = sp.Integer(0)
    for layer in range(1, depth + 1):
        tail = sp.Integer(1)
        for k in range(layer + 1, depth + 1):
            tail *= c[k] * widths[k - 1] * Mq
        lam_value += c[layer] * (widths[layer - 1] * acts[layer - 1] + 1) * tail
    return acts, lam_value


def lemma4_log_constants(widths, *, weight_bound, input_bound, act_lipschitz=1.0,
                         act_at_zero=0.0) -> tuple[np.ndarray, float]:
    acts, lam_value = lemma4_constants_exact(widths, weight_bound=weight_bound,
                                             input_bound=input_bound,
                                             act_lipschitz=act_lipschitz,
                                             act_at_zero=act_at_zero)
    return (np.array([float(sp.log(v).evalf(30)) for v in acts]),
            float(sp.log(lam_value).evalf(30)))


def lemma4_log_covering(widths, *, eps, weight_bound, input_bound, act_lipschitz=1.0,
                        act_at_zero=0.0) -> float:
    _, lam_value = lemma4_constants_exact(widths, weight_bound=weight_bound,
                                          input_bound=input_bound,
                                          act_lipschitz=act_lipschitz, act_at_zero=act_at_zero)
    grid = LEMMA4_GRID.subs({M: _q(weight_bound), lam: lam_value, EPS: _q(eps)})
    return float((fc_parameter_count(widths) * sp.log(grid)).evalf(30))


def lemma5_composition(log_cover_g, log_cover_f, *, eps_g, eps_f, lipschitz_g):
    return float(_F["lemma5"](eps_g, eps_f, lipschitz_g)), float(log_cover_g + log_cover_f)


def alpha_grid_size(coef_bound: float, eps_alpha_: float) -> int:
    return int(_F["alpha_size"](coef_bound, eps_alpha_))


def lemma6_cover_radius(eps_stages: Sequence[float], eps_alpha_: float, *, coef_bound,
                        output_bound) -> float:
    return float(_F["lemma6_radius"](coef_bound, math.fsum(eps_stages), len(eps_stages),
                                     output_bound, eps_alpha_))


def lemma6_log_cover_size(log_covers: Sequence[float], eps_alpha_: float, *, coef_bound) -> float:
    return math.fsum(log_covers) + float(_F["alpha_log"](len(log_covers), coef_bound, eps_alpha_))


def lemma6_objective(log_cover_fns: Sequence[Callable[[float], float]], eps_stages, eps_alpha_,
                     *, coef_bound) -> float:
    """Σ_t log N(H_t, ε_t) + T log(⌈A/ε_α⌉ + 1) at one allocation (eq. 22's bracket)."""
    return lemma6_log_cover_size([f(float(e)) for f, e in zip(log_cover_fns, eps_stages)],
                                 eps_alpha_, coef_bound=coef_bound)


def harmonic_mean_size(sizes: Sequence[int]) -> float:
    return float(len(sizes) / sum(sp.Rational(1, int(s)) for s in sizes))


def lemma8_deviation(sizes, *, loss_bound, delta) -> float:
    return float(_F["lemma8"](loss_bound, delta, len(sizes), harmonic_mean_size(sizes)))


def union_bound_at(log_cover_fn, radius, *, sizes, loss_lipschitz, loss_bound, delta,
                   nbar: float | None = None) -> float:
    """The bracket of eq. (27) at one radius ε (``nbar``: n̄ if already computed)."""
    nbar = harmonic_mean_size(sizes) if nbar is None else nbar
    return float(_F["union"](loss_lipschitz, radius, loss_bound, log_cover_fn(radius), delta,
                             len(sizes), nbar))


def union_bound_minimum(log_cover_fn, *, sizes, loss_lipschitz, loss_bound, delta,
                        lo: float = 1e-12, hi: float = 1e3) -> tuple[float, float]:
    """(min, argmin) of eq. (27)'s bracket over ε in [lo, hi]: a 601-point log grid, then a
    bounded Brent refinement in log ε between the neighbours of the best grid point."""
    nbar = harmonic_mean_size(sizes)

    def f(log_radius: float) -> float:
        return union_bound_at(log_cover_fn, math.exp(log_radius), sizes=sizes, nbar=nbar,
                              loss_lipschitz=loss_lipschitz, loss_bound=loss_bound, delta=delta)

    grid = np.linspace(math.log(lo), math.log(hi), 601)
    k = int(np.argmin([f(v) for v in grid]))
    res = optimize.minimize_scalar(f, bounds=(grid[max(k - 1, 0)], grid[min(k + 1, 600)]),
                                   method="bounded", options={"xatol": 1e-12})
    return float(res.fun), float(math.exp(res.x))
