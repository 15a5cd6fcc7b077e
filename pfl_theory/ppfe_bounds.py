"""PPFE generalization bounds, Lemma 9, the boosting bias bound and the choice of T.

Emrani, Najafi, Motahari — *Federated Ensemble Learning with Progressive Model
Personalization* (PPFE, arXiv 2602.14244, 2026), Section 5; docs/formulas.md §C.5.3, C.5.4,
C.5.10–C.5.12.  Theorem 7 / Corollary 2 are RECONSTRUCTED up to the hidden Õ constants and
log factors; the calculators set every hidden constant to 1 and drop the logs (say so when
you quote a number), so they are for *scaling* statements (in N, n̄, T, depth, γ_w), not
for absolute values.  Lemma 9 includes the endpoint correction of docs/formulas.md (κ† ≈ 3.134).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize

from pfl_theory.ppfe_covering import fc_parameter_count, harmonic_mean_size
from pfl_theory.validation import in_open_unit, in_range, positive, positive_int
from pfl_theory.validation import guard_public_functions

__all__ = ["stage_parameter_counts", "theorem7_terms", "s_t", "corollary2_terms",
           "KAPPA_MIN", "U_DAGGER", "KAPPA_DAGGER", "Lemma9Result", "lemma9_minimize",
           "lemma9_asymptotic", "boosting_bias_bound", "adaboost_bound_chain",
           "kappa0_from_ingredients", "stage_edge", "StageSelection", "select_stages"]


def stage_parameter_counts(stage_widths: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Shared and personalized parameter counts per stage (§C.5.3): stage t (0-based) of a
    depth-L net with widths ``stage_widths[t] = [d_0, ..., d_L]`` shares layers 1..L−t and
    personalizes layers L−t+1..L.  Returns ``(P_sh [T], P_pers [T])`` (float64)."""
    sh, pe = [], []
    for t, widths in enumerate(stage_widths):
        w = list(widths)
        depth = len(w) - 1
        if t >= depth + 1 or depth < 1:
            raise ValueError(f"stage {t} needs depth >= {t}, got widths {w}")
        per = [fc_parameter_count(w[l - 1:l + 1]) for l in range(1, depth + 1)]
        sh.append(float(sum(per[:depth - t])))
        pe.append(float(sum(per[depth - t:])))
    return np.asarray(sh), np.asarray(pe)


def theorem7_terms(stage_widths: Sequence[Sequence[int]], *, sizes: Sequence[int],
                   delta: float, depth_factor: bool = True) -> dict[str, float]:
    """Theorem 7 of PPFE (eq. 24, §C.5.3, RECONSTRUCTED), hidden constants 1, logs dropped:

    shared = √(L Σ_t P_sh^{(t)} / (N n̄)),  personalized = √(L Σ_{t≥1} P_pers^{(t)} / n̄),
    boosting = √(T / n̄),  confidence = √(log(1/δ) / (N n̄)),  total = their sum.

    Symbols: T = len(``stage_widths``), L = depth, n_i = ``sizes`` (N = len), n̄ harmonic mean
    (Lemma 8), δ = ``delta``.  ``depth_factor=False`` folds L into the constant (the paper
    may do so: "constants depend at most linearly on depth")."""
    if len(stage_widths) == 0 or any(len(w) < 2 for w in stage_widths):
        raise ValueError("stage_widths must list, for each of T >= 1 stages, the layer widths "
                         "(input, ..., output)")
    n_bar, n_clients = harmonic_mean_size(sizes), len(sizes)
    d = in_open_unit("delta", delta)
    sh, pe = stage_parameter_counts(stage_widths)
    depth = len(stage_widths[0]) - 1
    lf = depth if depth_factor else 1
    terms = {"shared": math.sqrt(lf * sh.sum() / (n_clients * n_bar)),
             "personalized": math.sqrt(lf * pe[1:].sum() / n_bar),
             "boosting": math.sqrt(len(stage_widths) / n_bar),
             "confidence": math.sqrt(math.log(1 / d) / (n_clients * n_bar))}
    terms["total"] = sum(terms.values())
    return terms


def s_t(num_stages: int, gamma_w: float) -> float:
    """S_T(γ) = Σ_{t=1}^{T−1} t γ^{2t} (§C.5.4); = T(T−1)/2 at γ = 1, ≤ γ²/(1−γ²)² for γ < 1."""
    t = positive_int("num_stages", num_stages)
    g = in_range("gamma_w", gamma_w, 0.0, 1.0)
    k = np.arange(1, t, dtype=np.float64)
    return float(np.sum(k * g ** (2 * k)))


def corollary2_terms(*, width: float, depth: int, num_stages: int, n: float, num_clients: int,
                     gamma_w: float, delta: float) -> dict[str, float]:
    """Corollary 2 of PPFE (eqs. 29–30, §C.5.4, RECONSTRUCTED), constants 1, logs dropped:

    shared = w √(L T / (N n)), personalized = w √(S_T(γ_w) / n), boosting = √(T / n),
    confidence = √(log(1/δ) / (N n)), total = sum.  Equal sizes n_i = n; personalized widths
    w_t = w γ_w^t.  Symbols: w = ``width``, L = ``depth``, T = ``num_stages``,
    N = ``num_clients``, γ_w = ``gamma_w`` ∈ (0, 1], δ = ``delta``."""
    w, nn = positive("width", width), positive("n", n)
    depth_ = positive_int("depth", depth)
    t = positive_int("num_stages", num_stages)
    n_clients = positive_int("num_clients", num_clients)
    g = in_range("gamma_w", gamma_w, 0.0, 1.0, closed=True)
    if g == 0:
        raise ValueError("gamma_w must be > 0")
    d = in_open_unit("delta", delta)
    terms = {"shared": w * math.sqrt(depth_ * t / (n_clients * nn)),
             "personalized": w * math.sqrt(s_t(t, g) / nn),
             "boosting": math.sqrt(t / nn),
             "confidence": math.sqrt(math.log(1 / d) / (n_clients * nn))}
    terms["total"] = sum(terms.values())
    return terms


KAPPA_MIN = math.sqrt(2 * math.e)  # min of e^u/√u (at u = 1/2): critical points exist iff κ ≥ this
U_DAGGER = float(optimize.brentq(lambda u: math.exp(u) - 1 - 2 * u, 0.5, 5.0))  # ≈ 1.25643
KAPPA_DAGGER = math.exp(U_DAGGER) / math.sqrt(U_DAGGER)  # ≈ 3.13395: interior optimum iff κ > κ†


@dataclass(frozen=True)
class Lemma9Result:
    """Minimiser of φ(x) = a x + √(b log(c/x)) on (0, c]: ``x_star``, ``value`` = φ(x*),
    ``u_star`` = log(c/x*), ``kappa`` = 2ac/√b, ``interior`` (False ⇒ x* = c)."""

    x_star: float
    value: float
    u_star: float
    kappa: float
    interior: bool


def _u2(log_kappa: float) -> float:
    """Larger root of e^u/√u = κ, i.e. u − ½ log u = log κ, u > ½ (needs κ ≥ √(2e))."""
    f = lambda u: u - 0.5 * math.log(u) - log_kappa  # noqa: E731
    hi = max(1.0, 2.0 * log_kappa + 2.0)
    return float(optimize.brentq(f, 0.5, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps))


def lemma9_minimize(a: float, b: float, c: float) -> Lemma9Result:
    """Lemma 9 of PPFE (§C.5.10, RECONSTRUCTED, with the endpoint correction):

    minimise φ(x) = a x + √(b log(c/x)) over x ∈ (0, c].  With u = log(c/x) and κ = 2ac/√b,
    critical points solve e^u/√u = κ (eq. 28); the larger root u₂ is a local minimum.  The
    global minimiser is x* = c e^{−u₂} = √b/(2a√u₂), φ* = √b(√u₂ + 1/(2√u₂)) if κ > κ† ≈ 3.13395,
    else the endpoint x* = c, φ* = ac (the paper's narrative misses this case)."""
    a, b, c = positive("a", a), positive("b", b), positive("c", c)
    log_kappa = math.log(2 * a * c) - 0.5 * math.log(b)
    kappa = math.exp(min(log_kappa, 700.0))
    if log_kappa <= math.log(KAPPA_DAGGER):
        return Lemma9Result(c, a * c, 0.0, kappa, False)
    u2 = _u2(log_kappa)
    x_star = math.sqrt(b) / (2 * a * math.sqrt(u2))
    value = math.sqrt(b) * (math.sqrt(u2) + 0.5 / math.sqrt(u2))
    return Lemma9Result(x_star, value, u2, kappa, True)


def lemma9_asymptotic(a: float, b: float, c: float) -> dict[str, float]:
    """Two-term asymptotics of Lemma 9 as b → 0 (κ → ∞): u₂ ≈ log κ + ½ log log κ,
    x* ≈ √b / (2a√u₂), φ* ≈ √(b u₂)(1 + 1/(2u₂)).  Requires κ > e (log log κ > 0)."""
    a, b, c = positive("a", a), positive("b", b), positive("c", c)
    lk = math.log(2 * a * c) - 0.5 * math.log(b)
    if lk <= 1.0:
        raise ValueError(f"asymptotic form needs kappa = 2ac/sqrt(b) > e, got {math.exp(lk):.4g}")
    u2 = lk + 0.5 * math.log(lk)
    return {"u_star": u2, "x_star": math.sqrt(b) / (2 * a * math.sqrt(u2)),
            "value": math.sqrt(b * u2) * (1 + 0.5 / u2)}


def boosting_bias_bound(gamma: float, num_stages: float | np.ndarray) -> np.ndarray | float:
    """AdaBoost training-error bound exp(−2γ²T) (Theorem 2 / eq. 14 of PPFE; Mohri et al.
    2018, Thm 6.1): γ = weak-learning edge (ε_t ≤ ½ − γ), T = ``num_stages``."""
    g = in_range("gamma", gamma, 0.0, 0.5, closed=False)
    t = np.asarray(num_stages, dtype=np.float64)
    if t.size == 0 or not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"num_stages must be finite and >= 0, got {num_stages!r}")
    out = np.exp(-2 * g * g * t)
    return float(out) if out.ndim == 0 else out


def adaboost_bound_chain(errors: Sequence[float]) -> dict[str, np.ndarray]:
    """The chain of eq. (14) for every prefix T = 1..len(errors) of weighted errors ε_t:
    ``product`` Π 2√(ε_t(1−ε_t)) ≤ ``exp_sum`` exp(−2 Σ (½ − ε_t)²) ≤ ``exp_gamma``
    exp(−2γ²T), γ = min_t (½ − ε_t) over the whole sequence (requires all ε_t < ½)."""
    e = np.asarray(errors, dtype=np.float64)
    if e.ndim != 1 or e.size == 0 or np.any(~np.isfinite(e)) or np.any(e < 0) or np.any(e >= 0.5):
        raise ValueError("errors must be a non-empty 1-D list of values in [0, 0.5)")
    gamma = float(np.min(0.5 - e))
    t = np.arange(1, e.size + 1)
    return {"product": np.cumprod(2 * np.sqrt(e * (1 - e))),
            "exp_sum": np.exp(-2 * np.cumsum((0.5 - e) ** 2)),
            "exp_gamma": np.exp(-2 * gamma ** 2 * t), "gamma": np.full(e.size, gamma)}


def kappa0_from_ingredients(*, loss_bound: float = 1.0, coef_bound: float = 1.0,
                            eps_alpha: float = 0.01) -> float:
    """κ₀ of the variance term κ₀√(T/n̄) [DERIVED from Lemma 6 + Lemma 8 + eq. 26]: the N T
    client coefficients add N T log(⌈A/ε_α⌉ + 1) to log N_tot; divided by 2N n̄ under the
    square root (and split off by √(x+y) ≤ √x + √y) this gives
    κ₀ = B √(log(⌈A/ε_α⌉ + 1) / 2).  B = ``loss_bound``, A = ``coef_bound``, ε_α = ``eps_alpha``."""
    b = positive("loss_bound", loss_bound)
    return b * math.sqrt(math.log(math.ceil(positive("coef_bound", coef_bound)
                                            / positive("eps_alpha", eps_alpha)) + 1) / 2)


def stage_edge(errors: Sequence[float], *, num_classes: int = 2) -> float:
    """Weak-learning edge γ of the bias term e^{−2γ²T} from the stages' weighted training
    errors ε_t (the smallest edge over the stages, as in eq. 13's ε_t ≤ ½ − γ).

    With C = ``num_classes`` > 2 the stages are SAMME learners (Zhu, Zou, Rosset, Hastie 2009,
    whose weak-learning condition is ε_t < 1 − 1/C) and the edge is normalised to the binary
    scale: γ_t = (1 − 1/C − ε_t) · C / (2(C − 1)) [toolkit normalisation, not in the paper],
    which is ½ − ε_t at C = 2, ½ at ε_t = 0 and 0 at chance level ε_t = 1 − 1/C.  Returns
    min_t γ_t (≤ 0 means some stage is no better than chance: the bound does not apply)."""
    e = np.asarray(errors, dtype=np.float64)
    c = positive_int("num_classes", num_classes, minimum=2)
    if e.ndim != 1 or e.size == 0 or not np.all(np.isfinite(e)) or np.any(e < 0) or np.any(e > 1):
        raise ValueError(f"errors must be a non-empty 1-D list of values in [0, 1], got {errors!r}")
    return float(np.min((1 - 1 / c - e) * c / (2 * (c - 1))))


@dataclass(frozen=True)
class StageSelection:
    """Result of :func:`select_stages`: integer ``t_star`` in [1, t_max], the continuous
    optimum ``t_star_continuous`` (0.0 when the endpoint wins), ``interior`` flag, the
    Lemma-9 parameters ``b_prime`` and ``kappa``, and the curve over ``ts`` = 1..t_max:
    ``bias`` e^{−2γ²T}, ``variance`` κ₀√(T/n), ``bound`` = bias + variance."""

    t_star: int
    t_star_continuous: float
    interior: bool
    b_prime: float
    kappa: float
    ts: np.ndarray
    bias: np.ndarray
    variance: np.ndarray
    bound: np.ndarray


#: largest edge γ an estimate is clipped to before :func:`select_stages` (which needs γ < ½; a
#: stage with zero training error has edge ½) — the CLI and the stage benchmarks use it
GAMMA_MAX = 0.49


def select_stages(*, gamma: float, kappa0: float, n: float, t_max: int) -> StageSelection:
    """Bias–variance choice of the number of stages T (PPFE §5 "Bias–Variance Tradeoff";
    docs/formulas.md §C.5.12, formula DERIVED from Corollary 2 + Theorem 2):

    Φ(T) = e^{−2γ²T} + κ₀ √(T/n).  With u = 2γ²T, Φ = e^{−u} + √(b' u), b' = κ₀²/(2γ²n) — the
    Lemma-9 family with a = c = 1: interior optimum iff κ = 2/√b' > κ†, then T* = u₂/(2γ²).
    The integer T* is the best of {1, ⌊u₂/(2γ²)⌋, ⌈u₂/(2γ²)⌉, t_max} clipped to [1, t_max]:
    Φ increases on (0, u₁), decreases on (u₁, u₂), increases after u₂ (monotone if κ < √(2e)),
    so these candidates contain the integer minimiser.  When √(2e) ≤ κ ≤ κ† the continuous
    optimum is the endpoint T = 0 (``t_star_continuous = 0``), but T ≥ 1 is required, so the
    local minimum u₂ still competes.  Symbols: γ = ``gamma`` (edge), κ₀ = ``kappa0`` (see
    :func:`kappa0_from_ingredients`), n = ``n`` (n̄), t_max = largest admissible T."""
    g = in_range("gamma", gamma, 0.0, 0.5, closed=False)
    k0, nn = positive("kappa0", kappa0), positive("n", n)
    tm = positive_int("t_max", t_max)
    if tm > 10**7:
        raise ValueError(f"t_max must be at most 1e7 (one bound value per T), got {tm}")
    if not 0 < k0 * k0 / (2 * g * g * nn) < math.inf:
        raise ValueError(f"b' = kappa0²/(2 gamma² n) leaves float64 for kappa0={kappa0!r}, "
                         f"gamma={gamma!r}, n={n!r}")
    b_prime = k0 ** 2 / (2 * g * g * nn)
    res = lemma9_minimize(1.0, b_prime, 1.0)
    t_cont = res.u_star / (2 * g * g)
    ts = np.arange(1, tm + 1, dtype=np.float64)
    bias = np.exp(-2 * g * g * ts)
    var = k0 * np.sqrt(ts / nn)
    bound = bias + var
    # local minimum u₂ exists whenever κ ≥ √(2e), even if the endpoint T = 0 wins globally
    # (T = 0 is not admissible, so u₂ is still a candidate)
    t_loc = t_cont if res.interior else (
        _u2(math.log(res.kappa)) / (2 * g * g) if res.kappa >= KAPPA_MIN else 1.0)
    cands = {1, tm} | {min(max(int(v), 1), tm) for v in (math.floor(t_loc), math.ceil(t_loc))}
    t_star = min(sorted(cands), key=lambda t: bound[t - 1])
    return StageSelection(int(t_star), float(t_cont), res.interior, b_prime, res.kappa, ts,
                          bias, var, bound)


# every public function above: an arithmetic error of its input is a one-line ValueError
guard_public_functions(globals())
