"""PPFE covering numbers and concentration: Lemmas 4, 5, 6 and 8 (all natural logs).

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), Section 5 and Appendix; docs/formulas.md
§C.5.5–C.5.9.  The lemma statements are RECONSTRUCTED (the seed lost every display
equation); the forms implemented are the ones docs/formulas.md derives from the proof narratives.
Lemma 4 is evaluated in log space so it stays finite for any depth and parameter counts up
to (and beyond) 1e12.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import optimize

from pfl_theory.validation import in_open_unit, nonnegative, positive, positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["fc_parameter_count", "lemma4_log_constants", "lemma4_log_covering",
           "lemma5_composition", "lemma6_cover_radius", "lemma6_log_cover_size",
           "alpha_grid", "Lemma6Allocation", "lemma6_log_covering", "harmonic_mean_size",
           "lemma8_deviation", "union_bound_deviation"]


def _widths(widths: Sequence[int]) -> list[int]:
    w = [positive_int(f"widths[{k}]", v) for k, v in enumerate(widths)]
    if len(w) < 2:
        raise ValueError("widths must list d_0, ..., d_L with L >= 1")
    return w


def fc_parameter_count(widths: Sequence[int]) -> int:
    """P = Σ_{l=1}^{L} d_l (d_{l−1} + 1) for widths ``[d_0, ..., d_L]`` (§C.1), exact int."""
    w = _widths(widths)
    return sum(w[l] * (w[l - 1] + 1) for l in range(1, len(w)))


def lemma4_log_constants(widths: Sequence[int], *, weight_bound: float, input_bound: float,
                         act_lipschitz: float = 1.0, act_at_zero: float = 0.0
                         ) -> tuple[np.ndarray, float]:
    """Lemma 4 of PPFE (§C.5.6, RECONSTRUCTED): ``(log A_0..log A_{L−1}, log Λ)``.

    A_0 = B_x, A_l = L_σ (d_{l−1} M A_{l−1} + M) + c_0 (so ‖a_l‖_∞ ≤ A_l), and
    Λ = Σ_{l=1}^{L} c_l (d_{l−1} A_{l−1} + 1) Π_{k=l+1}^{L} c_k d_{k−1} M, c_l = L_σ (l < L),
    c_L = 1, so that |f(x) − f'(x)| ≤ Λ η when all parameters differ by ≤ η.
    Symbols: d_l = ``widths[l]``, M = ``weight_bound`` (every scalar parameter in [−M, M]),
    B_x = ``input_bound`` (‖x‖_∞ ≤ B_x), L_σ = ``act_lipschitz``, c_0 = ``act_at_zero``
    (|σ(0)| ≤ c_0).  Network: a_l = σ(W_l a_{l−1} + b_l) (l < L), f = W_L a_{L−1} + b_L.
    Computed with ``logaddexp`` so no overflow at any depth.
    """
    w = _widths(widths)
    log_m = math.log(positive("weight_bound", weight_bound))
    log_bx = math.log(positive("input_bound", input_bound))
    log_ls = math.log(positive("act_lipschitz", act_lipschitz))
    c0 = nonnegative("act_at_zero", act_at_zero)
    log_c0 = math.log(c0) if c0 > 0 else -math.inf
    depth = len(w) - 1
    log_d = np.log(np.asarray(w, dtype=np.float64))
    log_a = np.empty(depth)  # log A_0 .. log A_{L-1}
    log_a[0] = log_bx
    for l in range(1, depth):
        inner = np.logaddexp(log_d[l - 1] + log_a[l - 1], 0.0)  # log(d A + 1)
        log_a[l] = np.logaddexp(log_ls + log_m + inner, log_c0)
    log_c = np.full(depth, log_ls)
    log_c[-1] = 0.0  # c_L = 1
    # per layer l = 1..L: log c_l + log(d_{l-1} A_{l-1} + 1) + Σ_{k>l} (log c_k + log d_{k-1} + log M)
    gain = log_c + log_d[:-1] + log_m  # index k-1 holds log(c_k d_{k-1} M)
    tail = np.concatenate([np.cumsum(gain[::-1])[::-1][1:], [0.0]])
    terms = log_c + np.logaddexp(log_d[:-1] + log_a, 0.0) + tail
    return log_a, float(np.logaddexp.reduce(terms))


def _log1p_ceil(log_x: float) -> float:
    """log(1 + ⌈x⌉) from log x; for x > 1e15 the upper bound log(x + 2) (ceil adds < 1)."""
    if log_x < 34.5:
        return math.log1p(math.ceil(math.exp(log_x)))
    return log_x + math.log1p(2.0 * math.exp(-log_x))


def lemma4_log_covering(widths: Sequence[int], *, eps: float, weight_bound: float,
                        input_bound: float, act_lipschitz: float = 1.0,
                        act_at_zero: float = 0.0) -> float:
    """Lemma 4 of PPFE (§C.5.6, RECONSTRUCTED): log N(F, ε, ‖·‖_∞) ≤ P log(1 + ⌈M Λ / ε⌉).

    F = fully connected nets with widths ``[d_0, ..., d_L]`` and all parameters in [−M, M]
    (grid of mesh 2η, η = ε/Λ).  Symbols as in :func:`lemma4_log_constants`; ε = ``eps``.
    Finite for any depth and parameter counts ≥ 1e12 (log space).
    """
    e = positive("eps", eps)
    _, log_lam = lemma4_log_constants(widths, weight_bound=weight_bound,
                                      input_bound=input_bound, act_lipschitz=act_lipschitz,
                                      act_at_zero=act_at_zero)
    log_x = math.log(weight_bound) + log_lam - math.log(e)
    return float(fc_parameter_count(widths)) * _log1p_ceil(log_x)


def lemma5_composition(log_cover_g: float, log_cover_f: float, *, eps_g: float, eps_f: float,
                       lipschitz_g: float) -> tuple[float, float]:
    """Lemma 5 of PPFE (§C.5.7): N(G∘F, ε_g + L_g ε_f) ≤ N(G, ε_g) N(F, ε_f).

    Returns ``(radius, log-size) = (ε_g + L_g ε_f, log N_G + log N_F)``.  Assumes every g is
    L_g-Lipschitz in ‖·‖_∞ and the G-cover is valid on the range of F."""
    radius = positive("eps_g", eps_g) + nonnegative("lipschitz_g", lipschitz_g) * positive(
        "eps_f", eps_f)
    return radius, nonnegative("log_cover_g", log_cover_g) + nonnegative("log_cover_f",
                                                                          log_cover_f)


#: largest number of points :func:`alpha_grid` builds (8 bytes each: 80 MB)
MAX_GRID = 10**7


def alpha_grid(coef_bound: float, eps_alpha: float) -> np.ndarray:
    """Grid of mesh 2ε_α on [−A, A] with ⌈A/ε_α⌉ + 1 points (Lemma 6 proof): every
    α ∈ [−A, A] is within ε_α of a point."""
    a, e = positive("coef_bound", coef_bound), positive("eps_alpha", eps_alpha)
    ratio = a / e
    if not ratio <= MAX_GRID:
        raise ValueError(f"alpha_grid: coef_bound/eps_alpha = {ratio:.3g} would need more than "
                         f"{MAX_GRID:.0e} grid points")
    k = math.ceil(ratio)
    return np.linspace(-a, a, k + 1) if k > 0 else np.zeros(1)


def lemma6_cover_radius(eps: Sequence[float], eps_alpha: float, *, coef_bound: float,
                        output_bound: float) -> float:
    """Lemma 6 of PPFE (§C.5.8, eq. 22): radius A Σ_t ε_t + T B_h ε_α of the product cover."""
    e = np.asarray([positive(f"eps[{t}]", v) for t, v in enumerate(eps)])
    if e.size == 0:
        raise ValueError("eps must hold one radius per stage (got none)")
    return float(positive("coef_bound", coef_bound) * e.sum()
                 + e.size * nonnegative("output_bound", output_bound) * positive("eps_alpha", eps_alpha))


def lemma6_log_cover_size(log_covers: Sequence[float], eps_alpha: float, *,
                          coef_bound: float) -> float:
    """Lemma 6 (eq. 22): log of Π_t |C_t| · (⌈A/ε_α⌉ + 1)^T."""
    logs = [nonnegative(f"log_covers[{i}]", v) for i, v in enumerate(log_covers)]
    if not logs:
        raise ValueError("log_covers must hold one log cover size per stage (got none)")
    t = len(logs)
    return float(sum(logs)) + t * math.log(math.ceil(
        positive("coef_bound", coef_bound) / positive("eps_alpha", eps_alpha)) + 1)


@dataclass(frozen=True)
class Lemma6Allocation:
    """A feasible ε-allocation of Lemma 6 and the resulting log-covering bound."""

    log_covering: float
    eps_stages: np.ndarray
    eps_alpha: float


def lemma6_log_covering(log_cover_fns: Sequence[Callable[[float], float]], *, eps: float,
                        coef_bound: float, output_bound: float) -> Lemma6Allocation:
    """Lemma 6 of PPFE (§C.5.8, eq. 22, RECONSTRUCTED): log N(F_T, ε) ≤ inf over
    A Σ_t ε_t + T B_h ε_α ≤ ε of Σ_t log N(H_t, ε_t) + T log(⌈A/ε_α⌉ + 1).

    ``log_cover_fns[t](ε_t)`` = log N(H_t, ε_t); A = ``coef_bound`` (|α_t| ≤ A), B_h =
    ``output_bound`` (‖h‖_∞ ≤ B_h).  The allocation is solved numerically: budget shares
    (softmax of free logits) optimised by Nelder–Mead from the equal split, objective
    evaluated exactly (with the ceilings).  Every feasible allocation gives a valid upper
    bound, so a sub-optimal optimiser only loosens the bound; the equal split is kept if
    better."""
    e = positive("eps", eps)
    a = positive("coef_bound", coef_bound)
    bh = positive("output_bound", output_bound)
    t = len(log_cover_fns)
    if t == 0:
        raise ValueError("log_cover_fns must contain at least one stage")

    def unpack(z: np.ndarray) -> tuple[np.ndarray, float]:
        share = np.exp(z - z.max())
        share = share / share.sum()
        return share[:t] * e / a, float(share[t] * e / (t * bh))

    def objective(z: np.ndarray) -> float:
        eps_t, eps_a = unpack(z)
        if np.any(eps_t <= 0) or eps_a <= 0:
            return math.inf
        return sum(f(float(v)) for f, v in zip(log_cover_fns, eps_t)) + t * math.log(
            math.ceil(a / eps_a) + 1)

    z0 = np.zeros(t + 1)
    simplex = np.vstack([z0, np.eye(t + 1)])  # unit steps in the logits: the ceilings make
    # the objective piecewise constant, so a tiny default simplex would not move
    res = optimize.minimize(objective, z0, method="Nelder-Mead",
                            options={"initial_simplex": simplex, "xatol": 1e-6, "fatol": 1e-9,
                                     "maxiter": 400 * (t + 1)})
    best = min((z0, res.x), key=objective)
    eps_t, eps_a = unpack(best)
    return Lemma6Allocation(float(objective(best)), eps_t, eps_a)


def harmonic_mean_size(sizes: Sequence[int]) -> float:
    """n̄ with 1/n̄ = (1/N) Σ_i 1/n_i (PPFE Lemma 8, §C.1; the proof's harmonic mean)."""
    n = np.asarray([positive(f"sizes[{k}]", v) for k, v in enumerate(sizes)], dtype=np.float64)
    if n.size == 0:
        raise ValueError("sizes must be non-empty")
    return float(n.size / np.sum(1.0 / n))


def lemma8_deviation(sizes: Sequence[int], *, loss_bound: float, delta: float) -> float:
    """Lemma 8 of PPFE (§C.5.9, RECONSTRUCTED via McDiarmid): w.p. ≥ 1 − δ,
    |L̂ − E L̂| ≤ B √(log(2/δ) / (2 N n̄)), L̂ = (1/N) Σ_i (1/n_i) Σ_j ℓ, ℓ ∈ [0, B].
    Symbols: n_i = ``sizes``, B = ``loss_bound``, δ = ``delta``."""
    b, d = positive("loss_bound", loss_bound), in_open_unit("delta", delta)
    return b * math.sqrt(math.log(2.0 / d) / (2.0 * len(sizes) * harmonic_mean_size(sizes)))


def union_bound_deviation(log_cover_fn: Callable[[float], float], *, sizes: Sequence[int],
                          loss_lipschitz: float, loss_bound: float, delta: float) -> tuple[float, float]:
    """Eqs. (26)–(27) of PPFE (§C.5.9, RECONSTRUCTED): w.p. ≥ 1 − δ,
    sup |L̂ − L| ≤ inf_ε {2 L_ℓ ε + B √((log N_tot(ε) + log(2/δ)) / (2 N n̄))}.
    Returns ``(bound, ε*)``; ε minimised numerically on a log grid then refined (bounded)."""
    lip, b = positive("loss_lipschitz", loss_lipschitz), positive("loss_bound", loss_bound)
    d = in_open_unit("delta", delta)
    nn = len(sizes) * harmonic_mean_size(sizes)

    def bound(log_eps: float) -> float:
        eps = math.exp(log_eps)
        return 2 * lip * eps + b * math.sqrt((log_cover_fn(eps) + math.log(2 / d)) / (2 * nn))

    grid = np.linspace(-40.0, math.log(b / lip + 1.0), 200)
    vals = [bound(g) for g in grid]
    k = int(np.argmin(vals))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = optimize.minimize_scalar(bound, bounds=(lo, hi), method="bounded")
    best = min((vals[k], grid[k]), (float(res.fun), float(res.x)))
    return best[0], math.exp(best[1])


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
